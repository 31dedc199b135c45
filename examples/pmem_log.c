/* An append-only persistent log on a libpmem-mapped file (PMDK's libpmem, unmodified).
 *
 * Why it exists: the second example of the pmsim tracer, for `--pm pmdk`: the log lives in a
 * file mapped with pmem_map_file; entries are written with plain stores and made durable with
 * pmem_persist, then committed by bumping the persistent tail with pmem_memcpy_persist. None of
 * libpmem is rebuilt: the tracer intercepts its calls.
 *
 * Usage: pmem_log FILE [ENTRIES]   (default 50). Per entry it executes:
 *   4 stores (the entry's 4 words, volatile so they stay 4), pmem_persist of the entry (one
 *   64 B line: 1 clwb + 1 sfence), pmem_memcpy_persist of the 8 B tail (1 store + 1 clwb +
 *   1 sfence). Before the loop: pmem_memset_persist of the 64 B header (1 store + 1 clwb +
 *   1 sfence).
 */
#include <libpmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct entry {
  uint64_t seq, a, b, check;
  uint64_t pad[4];
};

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: pmem_log FILE [ENTRIES]\n");
    return 2;
  }
  long n = argc > 2 ? atol(argv[2]) : 50;
  size_t len = 64 + (size_t)n * sizeof(struct entry);
  size_t mapped;
  int is_pmem;
  uint8_t *base = pmem_map_file(argv[1], len, PMEM_FILE_CREATE, 0644, &mapped, &is_pmem);
  if (!base) {
    perror("pmem_map_file");
    return 1;
  }
  pmem_memset_persist(base, 0, 64); /* header: tail = 0 */
  struct entry *log = (struct entry *)(base + 64);
  uint64_t sum = 0;
  for (long i = 0; i < n; i++) {
    volatile struct entry *e = &log[i];
    e->seq = (uint64_t)i;
    e->a = (uint64_t)i * 3;
    e->b = (uint64_t)i * 5;
    e->check = (uint64_t)i * 8;
    pmem_persist(&log[i], 64);
    uint64_t tail = (uint64_t)i + 1;
    pmem_memcpy_persist(base, &tail, sizeof tail);
    sum += log[i].check;
  }
  printf("entries=%llu sum=%llu\n", (unsigned long long)*(uint64_t *)base, (unsigned long long)sum);
  pmem_unmap(base, mapped);
  return 0;
}
