// pmsim measurement driver for CCEH (DICL/CCEH, src/CCEH_MSB.cpp): N inserts of pseudo-random
// 64-bit keys by T threads, no lookups unless a third argument is given, and no emulated flush
// latency (the simulator times the flushes). Ours; CCEH itself is not part of pmsim.
#include "src/CCEH.h"
#include "keys.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
extern uint64_t kWriteLatencyInNS;
int main(int argc, char **argv) {
  size_t n = strtoul(argv[1], 0, 10), t = argc > 2 ? strtoul(argv[2], 0, 10) : 1;
  kWriteLatencyInNS = 0;
  std::vector<uint64_t> keys = random_keys(n, 0);
  Hash *table = new CCEH(16 * 1024 / Segment::kNumSlot);
  std::vector<std::thread> th;
  for (size_t i = 0; i < t; i++)
    th.emplace_back([&, i] {
      for (size_t j = i; j < n; j += t)
        table->Insert(keys[j], reinterpret_cast<Value_t>(keys[j]));
    });
  for (auto &h : th)
    h.join();
  size_t miss = 0;
  if (argc > 3)
    for (auto &k : keys)
      miss += table->Get(k) != reinterpret_cast<Value_t>(k);
  printf("inserted %zu missing %zu\n", n, miss);
}
