/* Benchmark program for the tracer: a persistent open-addressing hash table on the heap (PM
 * under --pm heap), one clwb + sfence per insert, lookups of every key, 2 threads each on its
 * own table. Compute- and access-heavy, so tracing overhead shows (unlike flush-bound code). */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long keys = 200000;

static void *work(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
  uint64_t cap = 1;
  while (cap < (uint64_t)keys * 2)
    cap <<= 1;
  uint64_t *tab = calloc(cap * 2, sizeof *tab);
  uint64_t found = 0;
  for (long i = 0; i < keys; i++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t k = (seed >> 1) | 1, h = (k * 0x9E3779B97F4A7C15ULL) & (cap - 1);
    while (tab[2 * h] && tab[2 * h] != k)
      h = (h + 1) & (cap - 1);
    tab[2 * h + 1] = i;
    tab[2 * h] = k;
    asm volatile("clwb %0" : "+m"(tab[2 * h]));
    _mm_sfence();
  }
  seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
  for (long i = 0; i < keys; i++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t k = (seed >> 1) | 1, h = (k * 0x9E3779B97F4A7C15ULL) & (cap - 1);
    while (tab[2 * h] && tab[2 * h] != k)
      h = (h + 1) & (cap - 1);
    found += tab[2 * h] == k;
  }
  free(tab);
  return (void *)(uintptr_t)found;
}

int main(int argc, char **argv) {
  if (argc > 1)
    keys = atol(argv[1]);
  pthread_t t[2];
  for (long i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, work, (void *)(uintptr_t)i);
  uint64_t total = 0;
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(t[i], &r);
    total += (uint64_t)(uintptr_t)r;
  }
  printf("found=%llu\n", (unsigned long long)total);
  return 0;
}
