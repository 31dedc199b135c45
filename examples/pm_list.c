/* A persistent linked list shared by two threads, made durable with clflush/clwb + sfence.
 *
 * Why it exists: the smallest real PM program that exercises everything the pmsim tracer must
 * see: heap-allocated "PM" (as FAST_FAIR and CCEH do), inline-asm flushes in three spellings
 * (clflush, `.byte 0x66; clflush` = CLFLUSHOPT, `.byte 0x66; xsaveopt` = CLWB), the sfence and
 * mfence intrinsics, a pthread mutex and an atomic counter. Its persistent stores are volatile
 * accesses so the compiler cannot merge them: each line below is one store in the trace.
 *
 * Usage: pm_list [NODES_PER_THREAD]   (default 100). Per thread and node it executes:
 *   3 PM stores (node key, value, next), 1 CLWB (old spelling), 1 sfence (intrinsic),
 *   lock, 1 PM store (head), 1 clflush (asm), 1 sfence (asm), unlock, 1 atomic fetch_add.
 * main first fills a persistent arena (ARENA_LINES stores, one per line), writes it back newest
 * line first (ARENA_LINES CLWBs, intrinsic) and fences (1 sfence, intrinsic), then initialises
 * the root (3 PM stores, 1 CLFLUSHOPT in the old spelling, 1 mfence, intrinsic) before the
 * threads. The arena is twice the simulated L1, so its oldest lines are written back from L2
 * while the root's line is in L1: a design whose sfence does not wait lets the root overtake
 * them, which the x86 crash check must see.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 2
#define ARENA_LINES 1024

struct node {
  uint64_t key, value;
  struct node *next;
} __attribute__((aligned(64)));

struct root {
  struct node *head;
  uint64_t count;
  uint64_t (*arena)[8];
} __attribute__((aligned(64)));

static struct root *root;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long per_thread = 100;

static void clwb(const void *p) { asm volatile(".byte 0x66; xsaveopt %0" : "+m"(*(volatile char *)p)); }
static void clflushopt(const void *p) { asm volatile(".byte 0x66; clflush %0" : "+m"(*(volatile char *)p)); }
static void clflush(const void *p) { asm volatile("clflush %0" : "+m"(*(volatile char *)p)); }
static void sfence_asm(void) { asm volatile("sfence" ::: "memory"); }

static void *worker(void *arg) {
  uint64_t id = (uint64_t)(uintptr_t)arg;
  for (long i = 0; i < per_thread; i++) {
    struct node *n = aligned_alloc(64, sizeof *n);
    volatile struct node *v = n;
    v->key = id * 1000000 + (uint64_t)i;
    v->value = (uint64_t)i * 7 + id;
    pthread_mutex_lock(&lock);
    v->next = root->head;
    clwb(n);
    _mm_sfence();
    *(struct node *volatile *)&root->head = n;
    clflush(&root->head);
    sfence_asm();
    pthread_mutex_unlock(&lock);
    __atomic_fetch_add(&root->count, 1, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1)
    per_thread = atol(argv[1]);
  root = aligned_alloc(64, sizeof *root);
  volatile struct root *vr = root;
  vr->count = 0;
  uint64_t(*arena)[8] = aligned_alloc(64, ARENA_LINES * 64);
  for (long i = 0; i < ARENA_LINES; i++)
    *(volatile uint64_t *)arena[i] = (uint64_t)i;
  (void)vr->count; /* the root's line is hot again; the arena's oldest lines are not */
  for (long i = ARENA_LINES - 1; i >= 0; i--)
    _mm_clwb(arena[i]);
  _mm_sfence();
  vr->head = NULL;
  vr->arena = arena;
  clflushopt(root);
  _mm_mfence();
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  uint64_t nodes = 0, sum = 0;
  for (struct node *n = root->head; n; n = n->next) {
    nodes++;
    sum += n->value;
  }
  printf("nodes=%llu count=%llu sum=%llu\n", (unsigned long long)nodes, (unsigned long long)root->count,
         (unsigned long long)sum);
  return nodes == root->count ? 0 : 1;
}
