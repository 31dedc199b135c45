// The drivers' keys: n pseudo-random 64-bit keys (xorshift64, fixed seed), the same every run.
#pragma once
#include <cstdint>
#include <vector>

static inline std::vector<uint64_t> random_keys(size_t n, unsigned shift) {
  std::vector<uint64_t> keys(n);
  uint64_t x = 88172645463325252ULL;
  for (auto &k : keys) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    k = (x >> shift) | 1; // odd: never the structures' empty-slot key 0
  }
  return keys;
}
