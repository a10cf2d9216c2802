"""tests/dtype_promote_numpy.py: lf_dtype_promote against NumPy's promote_types.

Run by meson test (suite 'python') as: python3 dtype_promote_numpy.py
LIBLAZYFUSE.so. For every pair of lazyfuse dtypes NumPy has (bool, the
signed and unsigned integers, f16, f32, f64, c64, c128), lf_dtype_promote must give
np.promote_types' answer (the same in NumPy 1.24 and 2: NEP 50 changed the
typing of Python scalars, not promote_types). bfloat16 is checked against
ml_dtypes (JAX's bfloat16 for NumPy) where it is importable: where
ml_dtypes has a common dtype lazyfuse must agree; where it has none (i16,
u16, f16 with bf16) lazyfuse's join gives f32, and i32, u32, i64, u64 with
bf16 give f64 (as those integers with f32 do), c64 and c128 with bf16 stay
c64 and c128. Any disagreement exits
non-zero; NumPy missing fails (it must not skip silently).
"""
import ctypes
import sys

import numpy as np

NAMES = {"bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
         "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
         "f16": np.float16, "f32": np.float32, "f64": np.float64,
         "c64": np.complex64, "c128": np.complex128}


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.lf_dtype_name.restype = ctypes.c_char_p
    lib.lf_dtype_name.argtypes = [ctypes.c_int]
    lib.lf_dtype_promote.restype = ctypes.c_int
    lib.lf_dtype_promote.argtypes = [ctypes.c_int, ctypes.c_int]
    names = []
    while lib.lf_dtype_name(len(names)) != b"?":
        names.append(lib.lf_dtype_name(len(names)).decode())
    code = {n: i for i, n in enumerate(names)}
    try:
        import ml_dtypes
        np_of = dict(NAMES, bf16=ml_dtypes.bfloat16)
    except ImportError:
        print("ml_dtypes not importable: bf16 rows checked against the join's rule only")
        np_of = dict(NAMES)
    bad = 0
    checked = 0
    for a in names:
        for b in names:
            got = names[lib.lf_dtype_promote(code[a], code[b])]
            if a in np_of and b in np_of:
                try:
                    want_t = np.promote_types(np_of[a], np_of[b])
                    want = next(n for n, t in np_of.items() if np.dtype(t) == want_t)
                except TypeError:  # ml_dtypes: no common dtype
                    want = "f32" if {a, b} & {"i16", "u16", "f16"} else "f64"
            elif "bf16" in (a, b):
                other = b if a == "bf16" else a
                want = (other if other in ("c64", "c128") else  # bf16 fits in c64's f32 parts
                        "bf16" if other in ("bool", "i8", "u8", "bf16") else
                        "f32" if other in ("i16", "u16", "f16", "f32") else "f64")
            else:
                print(f"{a}, {b}: no NumPy dtype to check against")
                bad += 1
                continue
            checked += 1
            if got != want:
                print(f"promote({a}, {b}) = {got}, NumPy gives {want}")
                bad += 1
    print(f"{checked} pairs checked, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
