// pmsim measurement driver for FAST_FAIR (DICL/FAST_FAIR, concurrent/src/btree.h): N inserts of
// pseudo-random keys by T threads, no lookups unless a third argument is given. Ours; FAST_FAIR
// itself is not part of pmsim.
#define CONCURRENT
#include "btree.h"
#include "keys.h"
#include <thread>
int main(int argc, char **argv) {
  size_t n = strtoul(argv[1], 0, 10), t = argc > 2 ? strtoul(argv[2], 0, 10) : 1;
  std::vector<uint64_t> keys = random_keys(n, 2);
  btree *bt = new btree();
  std::vector<std::thread> th;
  for (size_t i = 0; i < t; i++)
    th.emplace_back([&, i] {
      for (size_t j = i; j < n; j += t)
        bt->btree_insert(keys[j], (char *)keys[j]);
    });
  for (auto &h : th)
    h.join();
  size_t miss = 0;
  if (argc > 3)
    for (auto &k : keys)
      miss += bt->btree_search(k) != (char *)k;
  printf("inserted %zu missing %zu\n", n, miss);
}
