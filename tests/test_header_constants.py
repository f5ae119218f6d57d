"""A local header's scalar constants fold wherever the source includes it, whatever their
integer type and qualifiers: `const uint32_t kCapacity = ...;` (the `uint32_t` spelling was not
read before), `inline constexpr uint64_t kDigest = 4;`, `static constexpr long long ...`."""

from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.includes import scan_constants

HEADER = b"""#pragma once
#include <stdint.h>
const uint32_t kCapacity = 64 * 1024 * 1024;
const uint32_t kKeys = kCapacity / 2;
inline constexpr uint64_t kDigest = 4;
static constexpr long long kWide = 1LL << 40;
constexpr const int kWidth = 12;
const float kScale = 0.5f;
"""


def test_every_scalar_constant_of_a_header_is_read():
    env = ConstEnv()
    twice = scan_constants(HEADER, env)
    assert not twice
    assert {"kCapacity", "kKeys", "kDigest", "kWide", "kWidth", "kScale"} <= set(env.constants)
    assert env.lookup("kKeys") == 32 * 1024 * 1024
    assert env.lookup("kDigest") == 4
    assert env.lookup("kWide") == 1 << 40
