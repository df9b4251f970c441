"""Comparing two tensors as numpy arrays: bitwise first, then the largest absolute, relative and
ULP differences, and whether a tolerance accepts every element."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from repro_gate.compare.tensors import (
    compare_tensors,
    describe,
    element_bits,
    largest_sum_plus_one,
    max_ulp_distance,
)
from repro_gate.compare.tolerance import Tolerance


def test_bitwise_equal_tensors_carry_no_statistics() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = compare_tensors("w", a, a.copy(), None)
    assert result == {"name": "w", "status": "equal", "dtype": "float32", "shape": [2, 3],
                      "total_elements": 6}


def test_nan_against_nan_is_equal_bitwise_but_signed_zeros_are_not() -> None:
    nan = np.array([np.nan, 1.0], dtype=np.float32)
    assert compare_tensors("n", nan, nan.copy(), None)["status"] == "equal"
    zeros = compare_tensors("z", np.array([0.0]), np.array([-0.0]), None)
    assert (zeros["status"], zeros["differing_elements"], zeros["max_ulp"]) == (
        "different", 1, 1)
    assert zeros["max_abs_diff"] == 0.0


def test_one_ulp_in_one_element_is_counted_and_measured() -> None:
    a = np.ones(10, dtype=np.float32)
    b = a.copy()
    b[3] = np.nextafter(np.float32(1.0), np.float32(2.0))
    result = compare_tensors("w", a, b, None)
    assert result["status"] == "different"
    assert (result["differing_elements"], result["max_ulp"]) == (1, 1)
    assert result["max_abs_diff"] == float(np.finfo(np.float32).eps)
    assert result["max_rel_diff"] == result["max_abs_diff"] / float(b[3])


def test_a_tolerance_that_covers_every_element_is_within_tolerance() -> None:
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 2.0 + 1e-9, 3.0 - 1e-9])
    assert compare_tensors("w", a, b, Tolerance(atol=1e-8))["status"] == "within_tolerance"
    assert compare_tensors("w", a, b, Tolerance(atol=1e-10))["status"] == "different"
    assert compare_tensors("w", a, b, None)["status"] == "different"


def test_mismatched_dtype_or_shape_stops_before_the_elements() -> None:
    a = np.zeros(3, dtype=np.float32)
    assert compare_tensors("w", a, np.zeros(3, dtype=np.float64), None)["status"] == (
        "dtype_mismatch")
    mismatch = compare_tensors("w", a, np.zeros(4, dtype=np.float32), None)
    assert (mismatch["status"], mismatch["shape"]) == ("shape_mismatch", [3])
    assert "differing_elements" not in mismatch


def test_integers_and_bools_have_no_ulp_and_bools_no_magnitude() -> None:
    ints = compare_tensors("i", np.array([1, 5], dtype=np.int64), np.array([1, 9]), Tolerance(5))
    assert (ints["status"], ints["max_abs_diff"], ints["max_ulp"]) == ("within_tolerance", 4.0,
                                                                     None)
    bools = compare_tensors("m", np.array([True, False]), np.array([True, True]), Tolerance(1))
    assert bools["status"] == "different"  # a flipped flag is never within a tolerance
    assert (bools["max_abs_diff"], bools["max_rel_diff"], bools["max_ulp"]) == (None, None, None)


def test_bfloat16_differences_are_measured_in_its_own_ulps() -> None:
    bf16 = ml_dtypes.bfloat16
    a = np.array([1.0, 1.0], dtype=bf16)
    b = np.array([1.0, 1.0], dtype=bf16)
    b[1] = np.array([0x3F82], dtype=np.uint16).view(bf16)[0]  # two bfloat16 steps above 1.0
    result = compare_tensors("w", a, b, None)
    assert (result["dtype"], result["max_ulp"]) == ("bfloat16", 2)
    assert result["max_abs_diff"] == 2 * 2.0 ** -7


def test_an_infinite_difference_leaves_the_magnitudes_null() -> None:
    result = compare_tensors("w", np.array([1.0, np.inf]), np.array([1.5, 2.0]), Tolerance(1, 1))
    assert result["status"] == "different"
    assert (result["max_abs_diff"], result["max_rel_diff"]) == (None, None)
    assert result["differing_elements"] == 2


def test_ulp_distance_across_zero_counts_both_zeros() -> None:
    tiny = np.array([1], dtype=np.int32)  # the smallest positive float32
    negative_tiny = (np.array([1], dtype=np.uint32) | np.uint32(0x80000000)).view(np.int32)
    assert max_ulp_distance(tiny, negative_tiny) == 3  # +t, +0, -0, -t
    assert max_ulp_distance(tiny, np.array([5], dtype=np.int32)) == 4


def test_the_sum_of_two_huge_magnitudes_does_not_overflow() -> None:
    big = np.array([2**62, 3], dtype=np.int64)
    assert largest_sum_plus_one(big, big) == 2**63 + 1
    assert largest_sum_plus_one(np.array([0, 4]), np.array([0, 5])) == 10


def test_element_bits_are_one_signed_integer_per_element_or_two_for_complex128() -> None:
    assert element_bits(np.array([1.0], dtype=np.float32)).dtype == np.int32
    assert element_bits(np.zeros(3, dtype=np.complex128)).shape == (3, 2)
    assert describe("x", np.zeros((2, 0), dtype=np.uint8), "missing_in_b") == {
        "name": "x", "status": "missing_in_b", "dtype": "uint8", "shape": [2, 0],
        "total_elements": 0}
