"""The Python exception classes cover exactly the Workbench error codes the Rust side defines.

``nokv._nokv.ERROR_CODES`` is ``ErrorCode::ALL`` as strings; a code added in Rust without a class
in ``nokv.errors`` (or a class left behind for a code removed in Rust) fails here.
"""

from __future__ import annotations

from typing import List

import nokv
import nokv.errors as E
from nokv import _nokv

CONNECTION_CLASSES = ("Unavailable", "Unauthorized", "Unsupported")  # nokv.connect, not tools


def python_workbench_codes() -> List[str]:
    """The exception classes nokv.errors exports for Workbench codes, in their __all__ order."""
    return [
        name
        for name in E.__all__
        if isinstance(getattr(E, name), type)
        and issubclass(getattr(E, name), E.NoKVError)
        and name != "NoKVError"
        and name not in CONNECTION_CLASSES
    ]


def test_the_native_module_lists_each_code_once_as_a_string() -> None:
    codes = _nokv.ERROR_CODES
    assert isinstance(codes, tuple) and codes
    assert all(isinstance(code, str) and code for code in codes)
    assert len(set(codes)) == len(codes)
    assert set(_nokv.RETRYABLE_ERROR_CODES) <= set(codes)
    assert not set(CONNECTION_CLASSES) & set(codes)


def test_every_rust_code_has_a_python_class_and_no_more() -> None:
    rust = list(_nokv.ERROR_CODES)
    python = python_workbench_codes()
    missing = [code for code in rust if code not in python]
    extra = [code for code in python if code not in rust]
    assert not missing, f"codes defined in Rust without a class in nokv.errors: {missing}"
    assert not extra, f"classes in nokv.errors for codes Rust does not define: {extra}"
    assert python == rust, "nokv.errors.__all__ lists the codes in another order than ErrorCode::ALL"


def test_every_rust_code_maps_to_its_exported_class() -> None:
    for code in _nokv.ERROR_CODES:
        cls = E.error_class(code)
        assert cls is not E.NoKVError, code
        assert cls.__name__ == code and cls is getattr(E, code)
        assert code in nokv.__all__ and getattr(nokv, code) is cls
        err = E.from_envelope({"code": code, "message": "m"})
        assert type(err) is cls and err.code == code
        assert err.retryable == (code in _nokv.RETRYABLE_ERROR_CODES), code
        assert cls("m").retryable == err.retryable


def test_connection_classes_stay_mapped() -> None:
    for name in CONNECTION_CLASSES:
        assert E.error_class(name) is getattr(E, name) is getattr(nokv, name)
    assert E.Unavailable("m").retryable
    assert not E.Unauthorized("m").retryable and not E.Unsupported("m").retryable
