/* pmsim tracer: the runtime linked into every instrumented program.
 *
 * Why it exists: the pass (PmTracePass.cpp) turns each memory access, flush and fence into a
 * call here; this file turns those calls into a pmsim binary trace (docs/binary-trace.md),
 * streamed while the program runs. It also supplies what the pass cannot see: synchronisation
 * (pthread mutexes, condition variables, create/join -> acquire/release), persistent memory
 * (a PM heap, mmap of DAX files, libpmem/libpmemobj calls) and crashes.
 *
 * What it guarantees:
 * - one global sequence counter gives every event its gid (the global order); sync events on
 *   one address take their gid and ordinal under one lock, so gid order and ordinals agree;
 * - per-thread buffers of encoded events, written as BLOCK records of at most 64 KiB, so memory
 *   use is bounded and the trace streams; thread ids are compact (0, 1, 2 ... in order of a
 *   thread's first event);
 * - program addresses inside a PM region are mapped into the trace's one PM range
 *   (0x100000000 + 16 GiB), regions packed in order of registration, a mapped file's bytes at
 *   one place each for the whole run (struct pm_file); other addresses are kept (moved out of
 *   that window if they fall in it);
 * - one process per trace: the first instrumented process creates the trace file (O_EXCL); any
 *   other that finds it runs untraced and says so (untraced()); a forked child does not trace;
 * - a created thread's end (the release its join acquires) is its last event: after its
 *   thread_local and thread-specific-key destructors, also when it exits or is cancelled;
 * - a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) still writes what was buffered, a META
 *   record saying `incomplete`, and END, then dies of the same signal;
 * - with PMSIM_TRACE_OUT unset the program runs untraced (every hook returns at once).
 *
 * Configuration (set by `pmsim trace record`): PMSIM_TRACE_OUT (file; must not exist),
 * PMSIM_TRACE_PM (heap | dax:DIR | pmdk | range:ADDR:SIZE), PMSIM_TRACE_VOLATILE (keep | drop),
 * PMSIM_TRACE_META (provenance lines `key=value`, written into the trace) or
 * PMSIM_TRACE_META_FILE (a file holding them: `record` uses it, as one environment string is
 * limited to 128 KiB and the program's arguments are part of the provenance), PMSIM_TRACE_REPORT
 * (a file where each instrumented process says whether it traced; see report()).
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum {
  K_COMPUTE = 0, K_LOAD = 1, K_STORE = 2, K_NTSTORE = 3, K_RMW = 4, K_CLWB = 5, K_CLFLUSHOPT = 6,
  K_CLFLUSH = 7, K_SFENCE = 8, K_MFENCE = 9, K_OFENCE = 10, K_DFENCE = 11, K_ACQUIRE = 12,
  K_RELEASE = 13, K_STRAND = 14, K_BEGIN = 15, K_END = 16
};

#define PM_WINDOW 0x100000000ULL
#define PM_WINDOW_SIZE (16ULL << 30)
#define BLOCK_BYTES (64 * 1024)
#define MAX_THREADS 4096
#define MAX_RANGES 256
#define LINE 64ULL
#define MAX_LABELS 1024
#define MAX_LABEL_BYTES 256

/* ---------- configuration and state ---------- */

enum pm_mode { PM_HEAP, PM_DAX, PM_PMDK, PM_RANGE };

/* Tracing enabled. Atomic (sequentially consistent) because finish() turns it off and then waits
 * for every thread's event in progress (tbuf.busy): a thread marks itself busy, then checks it. */
static atomic_int g_on;
static int g_fd = -1;
static pid_t g_pid; /* the traced process (a vfork child shares our memory but is not it) */
static int g_child; /* a forked child: traces nothing, may close the trace's descriptor */
static enum pm_mode g_mode;
static int g_drop_volatile;
static char g_dax_dir[4096];
static atomic_uint_fast64_t g_gid;
static atomic_uint g_threads;
static atomic_flag g_file_lock = ATOMIC_FLAG_INIT;
static atomic_int g_finished;
static uint64_t g_total_events; /* under g_file_lock */
/* What the program did, for record's hint when it flushed lines but stored nothing to PM (the
 * wrong --pm): it flushed a line (PM or not), a PM line, it stored to PM. Set once, not counted. */
static atomic_int g_seen_flush, g_seen_pm_flush, g_seen_pm_store;
#define SEEN(flag) \
  do { \
    if (!atomic_load_explicit(&(flag), memory_order_relaxed)) \
      atomic_store_explicit(&(flag), 1, memory_order_relaxed); \
  } while (0)
/* Operation labels (pmsim_begin/pmsim_end), ids in order of first use; under g_label_lock. */
static char g_labels[MAX_LABELS][MAX_LABEL_BYTES + 1];
static atomic_uint g_nlabels;
static atomic_flag g_label_lock = ATOMIC_FLAG_INIT;

/* A live PM mapping; size 0 marks a slot whose mapping was unmapped (reused by the next one). */
struct range { uint64_t base; _Atomic uint64_t size; uint64_t trace_base; };
static struct range g_ranges[MAX_RANGES];
static atomic_int g_nranges;
static uint64_t g_next_trace_off; /* under g_range_lock */
static atomic_flag g_range_lock = ATOMIC_FLAG_INIT;
/* A file mapped as PM has one place in the trace, its byte at offset o at one trace address for
 * the whole run, however often and wherever the program maps it (a pool reopened, a header
 * mapped beside the whole pool, a file grown and mapped again), so a word written through one
 * mapping is the same word read through another. The file's offsets are covered by extents,
 * each a run of offsets placed at a run of trace addresses: the first covers the file as first
 * mapped; a file that grows gets more, the last extent extended in place while it is the last
 * trace space handed out (one file that grows stays contiguous), else a new extent, at least
 * as large as what the file had (so a file growing in small steps takes few). */
#define MAX_EXTENTS 48
struct pm_extent { uint64_t off, len, tb; };
struct pm_file { uint64_t dev, ino; int next; struct pm_extent ext[MAX_EXTENTS]; };
static struct pm_file g_files[MAX_RANGES];
static int g_nfiles; /* under g_range_lock */

struct tbuf {
  atomic_int busy; /* inside enter() .. leave(): finish() waits for it to clear */
  /* Another thread is writing this buffer out (steal_old): its owner, between setting busy and
   * touching the buffer, waits for it to clear (claim()). */
  atomic_int steal;
  uint32_t tid;
  uint32_t count;
  uint64_t prev_gid;
  uint64_t first_gid; /* the gid of the buffer's first event (count > 0) */
  uint32_t len;
  uint8_t data[BLOCK_BYTES + 256];
  uint32_t open[MAX_LABELS]; /* pmsim_begin()s of each label not yet ended on this thread */
};
static struct tbuf *g_bufs[MAX_THREADS];
static __thread struct tbuf *t_buf;
static __thread int t_in_hook; /* inside a wrapper that emits its own events */
/* Inside the runtime's event code (enter() .. leave()). A signal handler that runs
 * instrumented code while its thread is here must not touch the thread's half-written buffer
 * or wait for a lock the thread holds: its events are deferred (struct pend) and written by
 * the interrupted thread as soon as it leaves, in the order they happened. */
static __thread volatile int t_busy;
struct pend {
  uint8_t what, kind, size, has_value;
  const void *addr;
  const char *label;
  uint8_t value[64];
};
/* Lazily mmap'ed, committed page by page as used: a handler storm while its thread sits in a slow
 * write of the trace (a loaded host) must not outgrow it. */
#define MAX_PEND (1u << 18)
static __thread struct pend *t_pend;
static __thread uint32_t t_pend_n; /* records appended (atomic: a nested handler appends too) */
static __thread uint32_t t_pend_done;
/* Trace thread slots of threads that were joined, for reuse by later threads, and the slots of
 * threads that ended and await their join, by pthread_t (g_slot_lock). */
static uint8_t g_slot_free[MAX_THREADS];
static unsigned g_nfree;
/* Joins so far, and at which one each free slot was freed: a thread may take a slot only if
 * it was freed before the thread was created (t_created_gen), so two threads that could run
 * at the same time never share one. Threads not created through pthread_create here (main)
 * have generation 0 and take new slots. */
static uint64_t g_free_gen;
static uint64_t g_slot_gen[MAX_THREADS];
static __thread uint64_t t_created_gen;
#define ENDED_SLOTS 8192
static struct { pthread_t t; uint32_t tid; uint8_t used; } g_ended[ENDED_SLOTS];
static atomic_flag g_slot_lock = ATOMIC_FLAG_INIT;
/* Inside pmemobj_create/open, pmem_map_file or pmem2_map_new (--pm pmdk): the shared file
 * mappings the library makes are the pool, registered as PM when mapped, so the pool's
 * initialisation is traced as PM. */
static __thread int t_mapping_pool;
static int g_count_compute;     /* --compute count: emit the counted instructions */
/* Non-memory instructions the thread executed since its last event; the pass adds each basic
 * block's count on entry (PmTracePass.cpp). Initial-exec: the runtime is linked into the
 * executable, so the pass's accesses resolve to a fixed offset. */
__thread uint64_t __pmt_icount __attribute__((tls_model("initial-exec")));

static void spin_lock(atomic_flag *f) {
  while (atomic_flag_test_and_set_explicit(f, memory_order_acquire))
    ;
}
static void spin_unlock(atomic_flag *f) { atomic_flag_clear_explicit(f, memory_order_release); }

static void *raw_mmap(size_t len) {
  return (void *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

static void finish(const char *incomplete);

/* A fatal error of the runtime: one message, the trace finished (what was buffered, marked
 * incomplete with the reason), exit status 2. `trace_ok` = 0 where the trace file itself failed
 * (or its lock is held), so nothing more is written to it. */
static void die_(const char *msg, int trace_ok) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "pmsim: error: tracer runtime: %s\n", msg);
  if (write(2, buf, (size_t)n) < 0) {
  }
  if (trace_ok) {
    snprintf(buf, sizeof buf, "incomplete=tracer runtime: %s", msg);
    finish(buf);
  }
  syscall(SYS_exit_group, 2); /* not _exit: the wrapper below would finish the trace again */
  __builtin_unreachable();
}
static void die(const char *msg) { die_(msg, 1); }

static void write_all(const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(g_fd, b, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      die_("cannot write the trace file", 0);
    }
    b += w;
    n -= (size_t)w;
  }
}

/* ---------- address translation ---------- */

/* The file being placed in the PM range by this thread (-1: none), to name it if it does not fit. */
static __thread int t_placing_fd = -1;

/* "FILE" of the descriptor being placed, or "" (a region that is no file's). */
static void placing_path(char *path, size_t cap, const char *before, const char *after) {
  char link[64], p[256];
  ssize_t n = -1;
  if (t_placing_fd >= 0) {
    snprintf(link, sizeof link, "/proc/self/fd/%d", t_placing_fd);
    n = readlink(link, p, sizeof p - 1);
  }
  if (n > 0) {
    p[n] = 0;
    snprintf(path, cap, "%s%s%s", before, p, after);
  } else {
    path[0] = 0;
  }
}

static void range_full(uint64_t size) {
  char what[320], msg[480];
  placing_path(what, sizeof what, " (", ")");
  uint64_t used = g_next_trace_off;
  spin_unlock(&g_range_lock);
  snprintf(msg, sizeof msg,
           "persistent memory regions exceed the trace's 16 GiB PM range: a mapping%s needs %.1f MiB "
           "more, %.1f MiB are placed already (map less of it, or make the file smaller)",
           what, (double)size / 1048576, (double)used / 1048576);
  die(msg);
}

/* Trace space for `size` bytes, page-aligned; under g_range_lock. */
static uint64_t reserve_trace(uint64_t size) {
  uint64_t tb = PM_WINDOW + g_next_trace_off;
  if (size > PM_WINDOW_SIZE - g_next_trace_off)
    range_full(size);
  g_next_trace_off += (size + 4095) & ~4095ULL;
  if (g_next_trace_off > PM_WINDOW_SIZE)
    g_next_trace_off = PM_WINDOW_SIZE;
  return tb;
}

/* Registers [base, base+size) at trace address tb; under g_range_lock (kept). */
static void put_range_locked(uint64_t base, uint64_t size, uint64_t tb) {
  int n = atomic_load(&g_nranges), slot = n;
  for (int i = 0; i < n; i++)
    if (atomic_load(&g_ranges[i].size) == 0) {
      slot = i;
      break;
    }
  if (slot >= MAX_RANGES) {
    char what[320], msg[480];
    placing_path(what, sizeof what, " (the next: ", ")");
    spin_unlock(&g_range_lock);
    snprintf(msg, sizeof msg,
             "more than 256 persistent memory regions mapped at once%s: unmap the ones no longer used, "
             "or give --pm a narrower directory",
             what);
    die(msg);
  }
  g_ranges[slot].base = base;
  g_ranges[slot].trace_base = tb;
  atomic_store_explicit(&g_ranges[slot].size, size, memory_order_release);
  if (slot == n)
    atomic_store_explicit(&g_nranges, n + 1, memory_order_release);
}

/* Registers [base, base+size) at trace address tb; under g_range_lock, which it releases. */
static void put_range(uint64_t base, uint64_t size, uint64_t tb) {
  put_range_locked(base, size, tb);
  spin_unlock(&g_range_lock);
}

/* Already registered: a range at base covering size bytes. Under g_range_lock. */
static int have_range(uint64_t base, uint64_t size) {
  int n = atomic_load(&g_nranges);
  for (int i = 0; i < n; i++)
    if (g_ranges[i].base == base && atomic_load(&g_ranges[i].size) >= size)
      return 1;
  return 0;
}

static void add_range(uint64_t base, uint64_t size, int identity) {
  if (!size)
    return;
  spin_lock(&g_range_lock);
  if (have_range(base, size)) {
    spin_unlock(&g_range_lock);
    return;
  }
  put_range(base, size, identity ? base : reserve_trace(size));
}

/* The file's extents cover its offsets [0, need); under g_range_lock. */
static void cover_file(struct pm_file *f, uint64_t need) {
  struct pm_extent *last = f->next ? &f->ext[f->next - 1] : NULL;
  uint64_t covered = last ? last->off + last->len : 0;
  if (need <= covered)
    return;
  uint64_t extra = (need - covered + 4095) & ~4095ULL;
  /* A file that grew once likely grows again: room for as much again (up to 1 GiB more), if
   * the trace's PM range has it. A file's first extent is its size. */
  uint64_t more = covered < (1ULL << 30) ? covered : (1ULL << 30);
  uint64_t room = PM_WINDOW_SIZE - g_next_trace_off;
  uint64_t len = extra + more <= room ? extra + more : extra;
  if (last && last->tb + last->len == PM_WINDOW + g_next_trace_off) {
    reserve_trace(len); /* right after the last extent: it grows in place */
    last->len += len;
    return;
  }
  if (f->next >= MAX_EXTENTS) {
    spin_unlock(&g_range_lock);
    die("a persistent memory file grew (and was mapped again) in more than 48 separate steps");
  }
  f->ext[f->next++] = (struct pm_extent){covered, len, reserve_trace(len)};
}

/* A mapping of `len` bytes of the file open as fd, from file offset off, at base: one range per
 * extent of the file it maps. */
static void add_file_range(uint64_t base, uint64_t len, int fd, uint64_t off) {
  struct stat st;
  if (!len || fstat(fd, &st) != 0) {
    add_range(base, len, 0);
    return;
  }
  spin_lock(&g_range_lock);
  struct pm_file *f = NULL;
  for (int i = 0; i < g_nfiles; i++)
    if (g_files[i].dev == (uint64_t)st.st_dev && g_files[i].ino == (uint64_t)st.st_ino)
      f = &g_files[i];
  if (!f) {
    if (g_nfiles >= MAX_RANGES) {
      char what[320], msg[480];
      t_placing_fd = fd;
      placing_path(what, sizeof what, " (the 257th: ", ")");
      t_placing_fd = -1;
      spin_unlock(&g_range_lock);
      snprintf(msg, sizeof msg, "more than 256 persistent memory files mapped%s: give --pm a narrower directory", what);
      die(msg);
    }
    f = &g_files[g_nfiles++];
    f->dev = (uint64_t)st.st_dev;
    f->ino = (uint64_t)st.st_ino;
    f->next = 0;
  }
  uint64_t need = off + len, fsize = (uint64_t)st.st_size;
  t_placing_fd = fd;
  cover_file(f, need > fsize ? need : fsize);
  for (int i = 0; i < f->next; i++) {
    const struct pm_extent *e = &f->ext[i];
    uint64_t lo = off > e->off ? off : e->off, hi = need < e->off + e->len ? need : e->off + e->len;
    if (lo >= hi)
      continue;
    if (!have_range(base + (lo - off), hi - lo))
      put_range_locked(base + (lo - off), hi - lo, e->tb + (lo - e->off));
  }
  t_placing_fd = -1;
  spin_unlock(&g_range_lock);
}

/* The program unmapped [addr, addr+len): PM mappings wholly inside it are gone. */
static void drop_ranges(uint64_t addr, uint64_t len) {
  spin_lock(&g_range_lock);
  int n = atomic_load(&g_nranges);
  for (int i = 0; i < n; i++) {
    uint64_t sz = atomic_load(&g_ranges[i].size);
    if (sz && g_ranges[i].base >= addr && g_ranges[i].base + sz <= addr + len)
      atomic_store_explicit(&g_ranges[i].size, 0, memory_order_release);
  }
  spin_unlock(&g_range_lock);
}

/* Trace address of a program address; *pm says whether it is persistent. */
static inline uint64_t translate(uint64_t a, int *pm) {
  int n = atomic_load_explicit(&g_nranges, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    const struct range *r = &g_ranges[i];
    /* The size first: a slot being reused publishes its base and trace base before its size. */
    uint64_t size = atomic_load_explicit(&r->size, memory_order_acquire);
    if (a - r->base < size) {
      *pm = 1;
      return a - r->base + r->trace_base;
    }
  }
  *pm = 0;
  if (a - PM_WINDOW < PM_WINDOW_SIZE)
    return a | (1ULL << 46);
  return a;
}

/* ---------- PM lines stored to since their last flush ----------
 * One bit per line of the trace's PM range (2^28 lines: 32 MiB of address space, reserved on
 * the first PM store, with pages touched only where the program stores; not kept under
 * --pm heap, whose memory no msync writes back): set by a traced PM
 * store (store, rmw, release; an ntstore leaves no dirty line in the cache), cleared by a flush
 * of the line. An msync writes back whole pages (msync_lines): the lines of its pages outside the
 * range it was given are flushed in the trace when their bit is set. Trace addresses. */
static _Atomic(_Atomic uint64_t *) g_dirty;

static _Atomic uint64_t *dirty_word(uint64_t t, uint64_t *bit, int create) {
  uint64_t i = (t - PM_WINDOW) / LINE;
  if (t - PM_WINDOW >= PM_WINDOW_SIZE)
    return NULL;
  _Atomic uint64_t *m = atomic_load_explicit(&g_dirty, memory_order_acquire);
  if (!m && create) {
    _Atomic uint64_t *fresh = raw_mmap(PM_WINDOW_SIZE / LINE / 8);
    if (fresh == (void *)-1)
      return NULL;
    if (atomic_compare_exchange_strong(&g_dirty, &m, fresh))
      m = fresh;
    else
      syscall(SYS_munmap, fresh, PM_WINDOW_SIZE / LINE / 8); /* another thread was first */
  }
  if (!m)
    return NULL;
  *bit = 1ULL << (i & 63);
  return &m[i >> 6];
}
static inline void dirty_set(uint64_t t) {
  uint64_t bit;
  if (g_mode == PM_HEAP)
    return; /* heap memory is no file mapping: no msync writes it back */
  _Atomic uint64_t *w = dirty_word(t, &bit, 1);
  if (w && !(atomic_load_explicit(w, memory_order_relaxed) & bit))
    atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
}
static inline void dirty_clear(uint64_t t) {
  uint64_t bit;
  _Atomic uint64_t *w = dirty_word(t, &bit, 0);
  if (w && (atomic_load_explicit(w, memory_order_relaxed) & bit))
    atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed);
}
static inline int dirty_test(uint64_t t) {
  uint64_t bit;
  _Atomic uint64_t *w = dirty_word(t, &bit, 0);
  return w && (atomic_load_explicit(w, memory_order_relaxed) & bit);
}

/* ---------- encoding ---------- */

static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)v | 0x80;
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static void flush_buf(struct tbuf *b) {
  if (!b || !b->count)
    return;
  uint8_t hdr[17];
  hdr[0] = 1;
  memcpy(hdr + 1, &b->tid, 4);
  memcpy(hdr + 5, &b->count, 4);
  memcpy(hdr + 9, &b->len, 4);
  memcpy(hdr + 13, &b->len, 4);
  spin_lock(&g_file_lock);
  write_all(hdr, 17);
  write_all(b->data, b->len);
  g_total_events += b->count;
  spin_unlock(&g_file_lock);
  b->count = 0;
  b->len = 0;
}

/* The owner of `b` is about to touch it: busy (sequentially consistent, against finish()'s
 * g_on = 0 and a thief's check), then wait for a thief that saw it idle to finish writing it. */
static inline void claim(struct tbuf *b) {
  atomic_store(&b->busy, 1);
  while (atomic_load(&b->steal))
    ;
}

/* A SIGKILL leaves every buffer in memory unwritten, and the repair keeps only the events
 * before the first gid no block holds: one thread with old events still buffered (main waiting
 * in pthread_join, a thread blocked on a lock, asleep, or making few events) would cost every
 * event written after them. So a thread that has just written a full block, whose events begin
 * at gid `first` and span `span` gids, also writes the buffers of idle threads (not inside the
 * event code) whose first event is more than half a span older: a thread that makes events as
 * fast as this one has none that old, so its buffer is left to fill. The thief is inside its own
 * event code (busy) throughout, so finish() waits for it before it writes the buffers itself. */
static void steal_old(struct tbuf *self, uint64_t first, uint64_t span) {
  if (first <= span / 2)
    return;
  uint64_t older = first - span / 2;
  unsigned n = atomic_load(&g_threads);
  for (unsigned i = 0; i < n && i < MAX_THREADS; i++) {
    struct tbuf *b = __atomic_load_n(&g_bufs[i], __ATOMIC_ACQUIRE);
    if (!b || b == self || !__atomic_load_n(&b->count, __ATOMIC_RELAXED) ||
        __atomic_load_n(&b->first_gid, __ATOMIC_RELAXED) >= older || atomic_load(&b->busy))
      continue;
    int zero = 0;
    if (!atomic_compare_exchange_strong(&b->steal, &zero, 1))
      continue;
    /* Dekker with claim(): either its owner sees steal set and waits, or this sees busy. */
    if (!atomic_load(&b->busy) && g_on && b->count && b->first_gid < older)
      flush_buf(b);
    atomic_store(&b->steal, 0);
  }
}

/* The calling thread's buffer, taking a trace thread slot on its first event: the lowest slot
 * of a thread that was joined (the join ordered that thread's end before what the joiner did
 * next, so its events and this thread's follow each other in one stream), else a new one. */
static struct tbuf *my_buf(void) {
  struct tbuf *b = t_buf;
  if (b)
    return b;
  spin_lock(&g_slot_lock);
  unsigned tid = MAX_THREADS;
  if (g_nfree) {
    unsigned n = atomic_load(&g_threads);
    for (tid = 0; tid < n && !(g_slot_free[tid] && g_slot_gen[tid] <= t_created_gen); tid++)
      ;
    if (tid < n) {
      g_slot_free[tid] = 0;
      g_nfree--;
      b = g_bufs[tid];
      memset(b->open, 0, sizeof b->open);
    }
  }
  spin_unlock(&g_slot_lock);
  if (!b) {
    tid = atomic_fetch_add(&g_threads, 1);
    if (tid >= MAX_THREADS) {
      atomic_fetch_sub(&g_threads, 1);
      die("more than 4096 threads alive at once");
    }
    b = raw_mmap(sizeof *b);
    b->tid = tid;
    __atomic_store_n(&g_bufs[tid], b, __ATOMIC_RELEASE);
    /* The header's thread count covers every thread before its first block is written. */
    spin_lock(&g_file_lock);
    uint32_t n = atomic_load(&g_threads);
    if (!atomic_load(&g_finished) && pwrite(g_fd, &n, 4, 12) != 4)
      die_("cannot update the trace header", 0);
    spin_unlock(&g_file_lock);
  }
  t_buf = b;
  return b;
}

/* The thread ends: its buffer is written out, and its slot waits for the thread's join (a
 * thread that is never joined, detached, keeps it). Events the dying thread still makes take a
 * new slot. */
static void end_slot(void) {
  struct tbuf *b = t_buf;
  if (!b || !g_on)
    return;
  t_busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  claim(b);
  if (g_on)
    flush_buf(b);
  t_buf = NULL;
  atomic_store_explicit(&b->busy, 0, memory_order_release);
  pthread_t self = pthread_self();
  spin_lock(&g_slot_lock);
  for (unsigned i = 0, h = (unsigned)((uint64_t)self * 0x9E3779B97F4A7C15ULL >> 51); i < ENDED_SLOTS; i++)
    if (!g_ended[(h + i) % ENDED_SLOTS].used) {
      g_ended[(h + i) % ENDED_SLOTS].t = self;
      g_ended[(h + i) % ENDED_SLOTS].tid = b->tid;
      g_ended[(h + i) % ENDED_SLOTS].used = 1;
      break;
    }
  spin_unlock(&g_slot_lock);
  atomic_signal_fence(memory_order_seq_cst);
  t_busy = 0;
}

/* Thread `t` was joined: its slot is free for the threads created from now on. */
static void free_slot(pthread_t t) {
  spin_lock(&g_slot_lock);
  for (unsigned i = 0, h = (unsigned)((uint64_t)t * 0x9E3779B97F4A7C15ULL >> 51); i < ENDED_SLOTS; i++) {
    unsigned k = (h + i) % ENDED_SLOTS;
    if (!g_ended[k].used)
      break;
    if (pthread_equal(g_ended[k].t, t)) {
      g_slot_free[g_ended[k].tid] = 1;
      g_slot_gen[g_ended[k].tid] = ++g_free_gen;
      g_nfree++;
      /* Backward-shift deletion keeps the probe chains whole. */
      unsigned j = k;
      for (;;) {
        j = (j + 1) % ENDED_SLOTS;
        if (!g_ended[j].used)
          break;
        unsigned home = (unsigned)((uint64_t)g_ended[j].t * 0x9E3779B97F4A7C15ULL >> 51) % ENDED_SLOTS;
        if ((j > k && (home <= k || home > j)) || (j < k && home <= k && home > j)) {
          g_ended[k] = g_ended[j];
          k = j;
        }
      }
      g_ended[k].used = 0;
      break;
    }
  }
  spin_unlock(&g_slot_lock);
}

/* Starts an event: gid and kind byte. */
static inline uint8_t *begin_ev(struct tbuf *b, uint64_t gid, unsigned kind) {
  uint8_t *p = b->data + b->len;
  p = put_varint(p, b->count ? gid - b->prev_gid - 1 : gid);
  if (!b->count)
    __atomic_store_n(&b->first_gid, gid, __ATOMIC_RELAXED);
  b->prev_gid = gid;
  *p++ = (uint8_t)kind;
  return p;
}

static inline void end_ev(struct tbuf *b, uint8_t *p) {
  b->len = (uint32_t)(p - b->data);
  __atomic_store_n(&b->count, b->count + 1, __ATOMIC_RELAXED);
  if (b->len >= BLOCK_BYTES) {
    uint64_t first = b->first_gid, span = b->prev_gid - first + 1;
    flush_buf(b);
    steal_old(b, first, span);
  }
}

/* The instructions counted since the thread's last event, as one `compute N` event ahead of the
 * next one (called before that event takes its gid, so gids stay increasing per thread). */
static inline void compute_ev(struct tbuf *b) {
  uint64_t n = __pmt_icount;
  if (!n)
    return;
  __pmt_icount = 0;
  if (!g_count_compute)
    return;
  uint64_t gid = atomic_fetch_add_explicit(&g_gid, 1, memory_order_relaxed);
  end_ev(b, put_varint(begin_ev(b, gid, K_COMPUTE), n));
}

/* ---------- entering and leaving the event code ---------- */

/* Marks the thread inside the event code; its buffer, or NULL when tracing is off. The caller
 * has checked t_busy (a reentered call is deferred instead). */
static inline struct tbuf *enter(void) {
  t_busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  struct tbuf *b = my_buf();
  claim(b); /* sequentially consistent: against finish()'s g_on = 0 */
  if (!g_on) {
    atomic_store_explicit(&b->busy, 0, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    t_busy = 0;
    return NULL;
  }
  return b;
}

static void drain_pending(void);

static inline void leave(struct tbuf *b) {
  atomic_store_explicit(&b->busy, 0, memory_order_release);
  atomic_signal_fence(memory_order_seq_cst);
  t_busy = 0;
  atomic_signal_fence(memory_order_seq_cst);
  if (__atomic_load_n(&t_pend_n, __ATOMIC_RELAXED))
    drain_pending();
}

/* Records an event a signal handler caused while its thread was inside the event code. Values
 * are copied now (the handler may write the word again before they are written out), from
 * `src` when given (the bytes an atomic writes, which memory may not hold yet), else from `addr`. */
enum { P_MEM, P_SYNC, P_FENCE, P_FLUSH, P_OP };
static void defer_from(unsigned what, unsigned kind, const void *addr, uint64_t size, int with_value,
                       const char *label, const uint8_t *src) {
  if (!t_pend) {
    struct pend *m = raw_mmap(sizeof(struct pend) * MAX_PEND);
    struct pend *none = NULL;
    if (!__atomic_compare_exchange_n(&t_pend, &none, m, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      syscall(SYS_munmap, m, sizeof(struct pend) * MAX_PEND); /* a nested handler was first */
  }
  do {
    unsigned n = (unsigned)(size > 64 ? 64 : size);
    uint32_t i = __atomic_fetch_add(&t_pend_n, 1, __ATOMIC_SEQ_CST);
    if (i >= MAX_PEND)
      die("a signal handler made more than 262144 traced accesses while its thread was inside the tracer");
    struct pend *r = &t_pend[i];
    r->what = (uint8_t)what;
    r->kind = (uint8_t)kind;
    r->size = (uint8_t)n;
    r->has_value = (uint8_t)(with_value != 0);
    r->addr = addr;
    r->label = label;
    if (with_value) {
      memcpy(r->value, src ? (const void *)src : addr, n);
      if (src)
        src += n;
    }
    addr = (const uint8_t *)addr + n;
    size -= n;
  } while (size);
}

static void defer(unsigned what, unsigned kind, const void *addr, uint64_t size, int with_value,
                  const char *label) {
  defer_from(what, kind, addr, size, with_value, label, NULL);
}

/* The body of every event entry point: `emit_call` (an emit_*(b, ...) call) between enter() and
 * leave(), or, in a signal handler that interrupted the thread inside the tracer, the event
 * deferred with defer(`what`, `kind`, `addr`, `size`, `with_value`, `label`). */
#define EMIT_OR_DEFER(what, kind, addr, size, with_value, label, emit_call) \
  do { \
    if (t_busy) { \
      defer(what, kind, addr, size, with_value, label); \
      return; \
    } \
    struct tbuf *b = enter(); \
    if (!b) \
      return; \
    emit_call; \
    leave(b); \
  } while (0)

/* ---------- events (between enter() and leave()) ---------- */

/* One memory event of at most 64 bytes within one line. */
static inline void mem_ev(struct tbuf *b, unsigned kind, uint64_t taddr, const void *value, unsigned size) {
  compute_ev(b);
  uint64_t gid = atomic_fetch_add_explicit(&g_gid, 1, memory_order_relaxed);
  uint8_t *p = begin_ev(b, gid, kind | (value ? 0x80 : 0));
  p = put_varint(p, taddr);
  *p++ = (uint8_t)size;
  if (value) {
    memcpy(p, value, size);
    p += size;
  }
  end_ev(b, p);
}

/* A load/store of any size at program address `a`, split at line boundaries; `value` the
 * bytes written (NULL for a load). Each page is translated on its own: PM regions are whole
 * pages, and the next page may be another region (a file's next extent) or not PM at all
 * (left out under --volatile drop). */
static void emit_mem(struct tbuf *b, unsigned kind, uint64_t a, uint64_t size, const uint8_t *value) {
  while (size) {
    int pm;
    uint64_t t = translate(a, &pm);
    uint64_t page = 4096 - (a & 4095), part = size < page ? size : page;
    a += part;
    size -= part;
    if (!pm && g_drop_volatile) {
      if (value)
        value += part;
      continue;
    }
    if (pm && value)
      SEEN(g_seen_pm_store);
    while (part) {
      uint64_t room = LINE - (t & (LINE - 1));
      unsigned n = (unsigned)(part < room ? part : room);
      if (pm && kind == K_STORE)
        dirty_set(t);
      mem_ev(b, kind, t, value, n);
      if (value)
        value += n;
      t += n;
      part -= n;
    }
  }
}

/* A load/store of any size: split at line boundaries and 64 bytes. */
static void mem_access(unsigned kind, const void *addr, uint64_t size, int with_value) {
  if (!g_on || !size)
    return;
  int pm;
  translate((uint64_t)addr, &pm);
  if (!pm && g_drop_volatile) {
    __pmt_icount++; /* still an instruction the thread executes */
    return;
  }
  EMIT_OR_DEFER(P_MEM, kind, addr, size, with_value, NULL,
                emit_mem(b, kind, (uint64_t)addr, size, with_value ? addr : NULL));
}

/* ---------- sync events: ordinals per address ---------- */

#define SYNC_STRIPES 64
#define SYNC_SLOTS (1u << 14)
struct sync_slot { uint64_t addr; uint64_t nsync; uint64_t nrel; };
static struct sync_slot *g_sync[SYNC_STRIPES];
static atomic_flag g_sync_lock[SYNC_STRIPES];

static struct sync_slot *sync_slot(unsigned stripe, uint64_t addr) {
  if (!g_sync[stripe])
    g_sync[stripe] = raw_mmap(sizeof(struct sync_slot) * SYNC_SLOTS);
  struct sync_slot *tab = g_sync[stripe];
  uint64_t h = (addr * 0x9E3779B97F4A7C15ULL) >> 40;
  for (unsigned i = 0; i < SYNC_SLOTS; i++) {
    struct sync_slot *s = &tab[(h + i) & (SYNC_SLOTS - 1)];
    if (s->addr == addr || s->addr == 0) {
      s->addr = addr;
      return s;
    }
  }
  spin_unlock(&g_sync_lock[stripe]);
  die("too many distinct synchronisation addresses");
  return NULL;
}

/* acquire / release / rmw at program address `addr`; `value` the bytes an rmw wrote. An rmw
 * across a line boundary (a split lock) is an rmw of its first line's bytes and a store of the
 * rest: a trace event stays within one line. */
static void emit_sync(struct tbuf *b, unsigned kind, const void *addr, unsigned size, const uint8_t *value) {
  int pm;
  uint64_t t = translate((uint64_t)addr, &pm);
  unsigned whole = size ? size : 1;
  if (size > LINE - (t & (LINE - 1)))
    size = (unsigned)(LINE - (t & (LINE - 1)));
  if (!size)
    size = 1;
  if (pm && value) {
    SEEN(g_seen_pm_store);
    dirty_set(t);
  }
  compute_ev(b);
  unsigned stripe = (unsigned)((t >> 3) * 0x9E3779B97F4A7C15ULL >> 58);
  spin_lock(&g_sync_lock[stripe]);
  struct sync_slot *s = sync_slot(stripe, t | 1ULL << 63);
  uint64_t gid = atomic_fetch_add_explicit(&g_gid, 1, memory_order_relaxed);
  uint64_t ord = kind == K_ACQUIRE ? s->nrel : s->nsync;
  s->nsync++;
  if (kind != K_ACQUIRE)
    s->nrel++;
  spin_unlock(&g_sync_lock[stripe]);
  uint8_t *p = begin_ev(b, gid, kind | (value ? 0x80 : 0));
  p = put_varint(p, t);
  *p++ = (uint8_t)size;
  p = put_varint(p, ord);
  if (value) {
    memcpy(p, value, size);
    p += size;
  }
  end_ev(b, p);
  if (value && whole > size)
    emit_mem(b, K_STORE, (uint64_t)addr + size, whole - size, value + size);
}

static void sync_ev(unsigned kind, const void *addr, unsigned size, int with_value) {
  if (!g_on)
    return;
  EMIT_OR_DEFER(P_SYNC, kind, addr, size, with_value, NULL, emit_sync(b, kind, addr, size, with_value ? addr : NULL));
}

static void emit_fence(struct tbuf *b, unsigned kind) {
  compute_ev(b);
  uint64_t gid = atomic_fetch_add_explicit(&g_gid, 1, memory_order_relaxed);
  end_ev(b, begin_ev(b, gid, kind));
}

static void fence_ev(unsigned kind) {
  if (!g_on)
    return;
  EMIT_OR_DEFER(P_FENCE, kind, NULL, 0, 0, NULL, emit_fence(b, kind));
}

static void emit_flush(struct tbuf *b, unsigned kind, const void *addr) {
  int pm;
  uint64_t t = translate((uint64_t)addr, &pm);
  if (pm)
    dirty_clear(t);
  compute_ev(b);
  uint64_t gid = atomic_fetch_add_explicit(&g_gid, 1, memory_order_relaxed);
  uint8_t *p = begin_ev(b, gid, kind);
  p = put_varint(p, t);
  *p++ = 1;
  end_ev(b, p);
}

static void flush_ev(unsigned kind, const void *addr) {
  if (!g_on)
    return;
  int pm;
  translate((uint64_t)addr, &pm);
  SEEN(g_seen_flush);
  if (pm)
    SEEN(g_seen_pm_flush);
  if (!pm && g_drop_volatile)
    return;
  EMIT_OR_DEFER(P_FLUSH, kind, addr, 0, 0, NULL, emit_flush(b, kind, addr));
}

static void emit_op(struct tbuf *b, unsigned kind, const char *label);

/* Writes the deferred events, oldest first, until none is left (a handler may add more
 * meanwhile). */
static void drain_pending(void) {
  for (;;) {
    struct tbuf *b = enter();
    uint32_t n;
    while (t_pend_done < (n = __atomic_load_n(&t_pend_n, __ATOMIC_SEQ_CST))) {
      const struct pend *r = &t_pend[t_pend_done++];
      if (!b)
        continue; /* tracing ended: dropped with everything else */
      const uint8_t *v = r->has_value ? r->value : NULL;
      switch (r->what) {
      case P_MEM: emit_mem(b, r->kind, (uint64_t)r->addr, r->size, v); break;
      case P_SYNC: emit_sync(b, r->kind, r->addr, r->size, v); break;
      case P_FENCE: emit_fence(b, r->kind); break;
      case P_FLUSH: emit_flush(b, r->kind, r->addr); break;
      default: emit_op(b, r->kind, r->label); break;
      }
    }
    /* All written: empty the list unless a handler appended since (then go round again). */
    int emptied = __atomic_compare_exchange_n(&t_pend_n, &n, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    if (emptied)
      t_pend_done = 0;
    if (b) {
      atomic_store_explicit(&b->busy, 0, memory_order_release);
      atomic_signal_fence(memory_order_seq_cst);
    }
    t_busy = 0;
    atomic_signal_fence(memory_order_seq_cst);
    if (emptied && !__atomic_load_n(&t_pend_n, __ATOMIC_SEQ_CST))
      return;
  }
}

/* ---------- hooks called by instrumented code ---------- */

void __pmt_load(const void *p, uint64_t n) { mem_access(K_LOAD, p, n, 0); }
void __pmt_store(const void *p, uint64_t n) { mem_access(K_STORE, p, n, 1); }
void __pmt_ntstore(const void *p, uint64_t n) { mem_access(K_NTSTORE, p, n, 1); }
void __pmt_rmw(const void *p, uint64_t n) { sync_ev(K_RMW, p, (unsigned)n, 1); }
void __pmt_fence(uint32_t kind) { fence_ev(kind); }
void __pmt_flush(uint32_t kind, const void *p) { flush_ev(kind, p); }
void __pmt_memop(const void *dst, const void *src, uint64_t n) {
  if (src)
    mem_access(K_LOAD, src, n, 0);
  mem_access(K_STORE, dst, n, 1);
}

/* A libc string or I/O call that wrote memory the program gave it (libc is not instrumented):
 * the pass calls this right after the call with its kind (StrKind in PmTracePass.cpp, the same
 * numbers), the character size `unit` (1; sizeof(wchar_t) for wcscpy ...), the destination,
 * the source (or NULL), the count argument `n` (strncpy's n, snprintf's size, fread's element
 * size; 0 when the call has none) and the call's result (a pointer as an integer, an int or
 * ssize_t sign-extended, a size_t zero-extended). What the call wrote is computed from the
 * result and the memory as it is now, and recorded as memcpy is: `load`s of the bytes read from
 * the source (a strcat's scan of the destination too), then `store`s of the bytes written. */
enum {
  S_CPY = 1, S_PCPY, S_NCPY, S_CAT, S_NCAT, S_MEMCCPY, S_DUP, S_NDUP, S_PRINTF, S_NPRINTF, S_READ,
  S_FREAD, S_GETS, S_WRITE, S_FWRITE, S_PUTS
};

/* strnlen in characters of `unit` bytes. */
static uint64_t str_units(const void *p, uint32_t unit, uint64_t max) {
  uint64_t i = 0;
  if (unit == 4)
    for (const uint32_t *w = p; i < max && w[i]; i++) {}
  else if (unit == 2)
    for (const uint16_t *w = p; i < max && w[i]; i++) {}
  else
    i = strnlen(p, max);
  return i;
}

void __pmt_strop(uint32_t kind, uint32_t unit, void *dst, const void *src, uint64_t n, uint64_t ret) {
  if (!g_on)
    return;
  const uint64_t all = UINT64_MAX;
  int64_t sret = (int64_t)ret;
  char *d = dst;
  uint64_t load = 0, store = 0; /* in characters */
  switch (kind) {
  case S_CPY: store = load = str_units(d, unit, all) + 1; break;
  case S_PCPY: store = load = ((char *)(uintptr_t)ret - d) / unit + 1; break; /* ret: the NUL */
  case S_NCPY: {
    uint64_t l = str_units(src, unit, n);
    store = n;
    load = l < n ? l + 1 : n;
    break;
  }
  case S_CAT:
  case S_NCAT: {
    /* The appended characters (and the NUL) start where the old string ended; the call read
     * the old string and its NUL to find that end. */
    uint64_t a = str_units(src, unit, kind == S_NCAT ? n : all), total = str_units(d, unit, all);
    uint64_t old = total >= a ? total - a : 0;
    mem_access(K_LOAD, d, (old + 1) * unit, 0);
    load = kind == S_NCAT && a >= n ? n : a + 1;
    store = a + 1;
    d += old * unit;
    break;
  }
  case S_MEMCCPY: store = load = ret ? (uint64_t)((char *)(uintptr_t)ret - d) : n; break;
  case S_DUP:
  case S_NDUP: {
    if (!ret)
      return;
    d = (char *)(uintptr_t)ret;
    uint64_t l = str_units(d, unit, all);
    store = l + 1;
    load = kind == S_NDUP && l >= n ? n : l + 1;
    break;
  }
  case S_PRINTF:
    if (sret < 0)
      return;
    store = (uint64_t)sret + 1;
    break;
  case S_NPRINTF:
    if (sret < 0 || n == 0)
      return;
    store = ((uint64_t)sret < n - 1 ? (uint64_t)sret : n - 1) + 1;
    break;
  case S_READ:
    if (sret <= 0)
      return;
    store = (uint64_t)sret;
    break;
  case S_FREAD: store = ret * n; break;
  case S_GETS:
    if (!ret)
      return;
    store = str_units(d, unit, all) + 1;
    break;
  /* Writers: what they read from the program's memory. */
  case S_WRITE:
    if (sret > 0)
      mem_access(K_LOAD, src, (uint64_t)sret, 0);
    return;
  case S_FWRITE: mem_access(K_LOAD, src, ret * n, 0); return;
  case S_PUTS: mem_access(K_LOAD, src, (str_units(src, unit, all) + 1) * unit, 0); return;
  default: return;
  }
  if (src && load)
    mem_access(K_LOAD, src, load * unit, 0);
  mem_access(K_STORE, d, store * unit, 1);
}

/* ---------- annotations (pmsim.h): operations and design-neutral persist barriers ---------- */

/* The id of `label`, registering it (and writing its LABEL record, ahead of any block that can
 * use it) on first use. Names are the text format's tokens: 1..256 bytes, no space or '#'. */
static uint32_t label_id(const char *label, const char *fn) {
  char msg[MAX_LABEL_BYTES + 128];
  size_t len = label ? strnlen(label, MAX_LABEL_BYTES + 1) : 0;
  int bad = len == 0 || len > MAX_LABEL_BYTES;
  for (size_t i = 0; i < len && !bad; i++)
    bad = label[i] == '#' || (unsigned char)label[i] < 0x21 || (unsigned char)label[i] > 0x7e;
  if (bad) {
    snprintf(msg, sizeof msg, "%s(\"%.64s\"): a label is 1 to %d printable ASCII characters without spaces or '#'",
             fn, label ? label : "(null)", MAX_LABEL_BYTES);
    die(msg);
  }
  spin_lock(&g_label_lock);
  uint32_t n = atomic_load(&g_nlabels);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(g_labels[i], label)) {
      spin_unlock(&g_label_lock);
      return i;
    }
  if (n >= MAX_LABELS) {
    spin_unlock(&g_label_lock);
    die("more than 1024 distinct pmsim_begin/pmsim_end labels");
  }
  memcpy(g_labels[n], label, len + 1);
  uint8_t hdr[9];
  uint32_t l32 = (uint32_t)len;
  hdr[0] = 2;
  memcpy(hdr + 1, &n, 4);
  memcpy(hdr + 5, &l32, 4);
  spin_lock(&g_file_lock);
  write_all(hdr, 9);
  write_all(label, len);
  spin_unlock(&g_file_lock);
  atomic_store(&g_nlabels, n + 1);
  spin_unlock(&g_label_lock);
  return n;
}

static void emit_op(struct tbuf *b, unsigned kind, const char *label) {
  const char *fn = kind == K_BEGIN ? "pmsim_begin" : "pmsim_end";
  uint32_t id = label_id(label, fn);
  if (kind == K_BEGIN) {
    b->open[id]++;
  } else if (b->open[id]) {
    b->open[id]--;
  } else {
    char msg[MAX_LABEL_BYTES + 96];
    snprintf(msg, sizeof msg, "pmsim_end(\"%s\") without a pmsim_begin(\"%s\") before it on this thread", label,
             label);
    die(msg);
  }
  compute_ev(b);
  uint64_t gid = atomic_fetch_add_explicit(&g_gid, 1, memory_order_relaxed);
  end_ev(b, put_varint(begin_ev(b, gid, kind), id));
}

static void op_ev(unsigned kind, const char *label) {
  if (!g_on)
    return;
  EMIT_OR_DEFER(P_OP, kind, NULL, 0, 0, label, emit_op(b, kind, label));
}

void pmsim_begin(const char *label) { op_ev(K_BEGIN, label); }
void pmsim_end(const char *label) { op_ev(K_END, label); }
void pmsim_ofence(void) { fence_ev(K_OFENCE); }
void pmsim_dfence(void) { fence_ev(K_DFENCE); }
void pmsim_strand(void) { fence_ev(K_STRAND); }

/* ---------- start, finish, crash ---------- */

static void report(const char *what);

static void write_meta_n(const char *text, uint32_t len) {
  uint8_t tag = 3;
  spin_lock(&g_file_lock);
  write_all(&tag, 1);
  write_all(&len, 4);
  write_all(text, len);
  spin_unlock(&g_file_lock);
}
static void write_meta(const char *text) { write_meta_n(text, (uint32_t)strlen(text)); }

/* The provenance in PMSIM_TRACE_META_FILE (read before the program runs: no malloc yet). */
static void write_meta_file(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size > UINT32_MAX / 2)
    die("cannot read the trace's provenance (PMSIM_TRACE_META_FILE)");
  size_t len = (size_t)st.st_size;
  if (len) {
    char *text = raw_mmap(len);
    size_t got = 0;
    while (got < len) {
      ssize_t r = read(fd, text + got, len - got);
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    write_meta_n(text, (uint32_t)got);
    syscall(SYS_munmap, text, len);
  }
  syscall(SYS_close, fd);
}

/* Ends tracing and writes every thread's buffered events; returns the file offset where END
 * goes. Threads still running stop tracing (g_on = 0); one in the middle of an event is waited
 * for (up to 2 s), so no event is half-written and the gids stay without gaps. */
static off_t finish_events(void) {
  /* The exiting thread's work after its last event. A thread that made no event at all (a
   * main() that only computes on its stack) takes a slot for it: the count is promised at exit. */
  if (!t_busy && (t_buf || (__pmt_icount && g_count_compute))) {
    int fresh = !t_buf;
    struct tbuf *own = my_buf();
    claim(own); /* another thread's steal_old() may be writing it out */
    compute_ev(own);
    atomic_store_explicit(&own->busy, 0, memory_order_release);
    uint32_t n = atomic_load(&g_threads);
    /* my_buf() leaves the header alone once finishing has begun (a forked child may share the
     * file); this is the traced process itself, so the thread count is set here. */
    if (fresh && pwrite(g_fd, &n, 4, 12) != 4)
      die_("cannot update the trace header", 0);
  }
  g_on = 0;
  unsigned n = atomic_load(&g_threads);
  for (unsigned i = 0; i < n && i < MAX_THREADS; i++) {
    struct tbuf *b = g_bufs[i];
    if (!b || b == t_buf)
      continue;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&b->busy)) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if (t1.tv_sec - t0.tv_sec > 2)
        break;
    }
  }
  for (unsigned i = 0; i < n && i < MAX_THREADS; i++)
    flush_buf(g_bufs[i]);
  spin_lock(&g_file_lock);
  off_t at = lseek(g_fd, 0, SEEK_CUR);
  spin_unlock(&g_file_lock);
  return at;
}

static void write_end(const char *incomplete) {
  if (incomplete)
    write_meta(incomplete);
  uint8_t end[13];
  end[0] = 0;
  memcpy(end + 1, &g_total_events, 8);
  uint32_t nlabels = atomic_load(&g_nlabels);
  memcpy(end + 9, &nlabels, 4);
  spin_lock(&g_file_lock);
  write_all(end, 13);
  spin_unlock(&g_file_lock);
  report("flushes");
}

/* The trace's end. The file stays open (it is close-on-exec): a thread that has not seen
 * g_on = 0 yet must not write into a file descriptor the program may reuse. */
static void finish(const char *incomplete) {
  if (!g_on || (pid_t)syscall(SYS_getpid) != g_pid || atomic_exchange(&g_finished, 1))
    return;
  finish_events();
  write_end(incomplete);
}

static void on_exit_hook(void) { finish(NULL); }

static void on_crash(int sig) {
  char msg[64];
  snprintf(msg, sizeof msg, "incomplete=killed by signal %d", sig);
  finish(msg);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* ---------- process exits and execs that skip atexit ---------- */

void _exit(int status) {
  finish(NULL);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
void _Exit(int status) { _exit(status); }

/* An exec replaces the traced program: its trace ends here, complete. Should the exec fail,
 * the END is taken back and tracing goes on (threads' events meanwhile are lost). */
static off_t exec_begin(void) {
  if (!g_on || (pid_t)syscall(SYS_getpid) != g_pid || atomic_exchange(&g_finished, 1))
    return -1; /* not tracing, or a vfork child (it shares our memory, not our trace) */
  off_t at = finish_events();
  write_end(NULL);
  return at;
}
static void exec_failed(off_t at) {
  if (at < 0)
    return;
  int e = errno;
  spin_lock(&g_file_lock);
  if (ftruncate(g_fd, at) == 0 && lseek(g_fd, at, SEEK_SET) == at) {
    atomic_store(&g_finished, 0);
    g_on = 1;
  }
  spin_unlock(&g_file_lock);
  errno = e;
}

/* The libc function a wrapper stands in front of. */
#define REAL(name) \
  static __typeof__(name) *real_##name; \
  if (!real_##name) \
    real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);

#define EXEC_WRAP(name, params, args) \
  int name params { \
    REAL(name); \
    off_t at = exec_begin(); \
    int r = real_##name args; \
    exec_failed(at); \
    return r; \
  }
EXEC_WRAP(execve, (const char *path, char *const argv[], char *const envp[]), (path, argv, envp))
EXEC_WRAP(execv, (const char *path, char *const argv[]), (path, argv))
EXEC_WRAP(execvp, (const char *file, char *const argv[]), (file, argv))
EXEC_WRAP(execvpe, (const char *file, char *const argv[], char *const envp[]), (file, argv, envp))
EXEC_WRAP(fexecve, (int fd, char *const argv[], char *const envp[]), (fd, argv, envp))

/* execl, execlp, execle: their arguments as an array, then the wrapped v-form. */
#define EXECL_ARGS(first) \
  va_list ap; \
  size_t n = 1; \
  va_start(ap, first); \
  while (va_arg(ap, char *)) \
    n++; \
  va_end(ap); \
  char **argv = alloca((n + 1) * sizeof *argv); \
  va_start(ap, first); \
  argv[0] = (char *)first; \
  for (size_t i = 1; i <= n; i++) \
    argv[i] = i < n ? va_arg(ap, char *) : NULL;
int execl(const char *path, const char *arg, ...) {
  EXECL_ARGS(arg)
  va_end(ap);
  return execv(path, argv);
}
int execlp(const char *file, const char *arg, ...) {
  EXECL_ARGS(arg)
  va_end(ap);
  return execvp(file, argv);
}
int execle(const char *path, const char *arg, ...) {
  EXECL_ARGS(arg)
  char *const *envp = va_arg(ap, char *const *);
  va_end(ap);
  return execve(path, argv, envp);
}

/* ---------- the trace file's descriptor ----------
 * The program must not close or replace it: daemons and test harnesses close every descriptor
 * they did not open, and the next file they open would get its number (and our blocks). To
 * the program it looks closed: closing it says EBADF, a close_range or closefrom skips it, and
 * a dup2 onto it first moves it elsewhere. It sits at 1000 or above where the limit allows. */
static int protected_fd(int fd) { return fd >= 0 && fd == g_fd && !g_child; }

int close(int fd) {
  REAL(close);
  if (protected_fd(fd)) {
    errno = EBADF;
    return -1;
  }
  return real_close(fd);
}
static void move_trace_fd(void) {
  spin_lock(&g_file_lock);
  int to = fcntl(g_fd, F_DUPFD_CLOEXEC, g_fd + 1);
  if (to >= 0) {
    syscall(SYS_close, g_fd);
    g_fd = to;
  }
  spin_unlock(&g_file_lock);
}
int dup2(int from, int to) {
  REAL(dup2);
  if (protected_fd(to) && from != to)
    move_trace_fd();
  return real_dup2(from, to);
}
int dup3(int from, int to, int flags) {
  REAL(dup3);
  if (protected_fd(to))
    move_trace_fd();
  return real_dup3(from, to, flags);
}
#ifdef SYS_close_range
static int close_range_sys(unsigned first, unsigned last, int flags) {
  return first > last ? 0 : (int)syscall(SYS_close_range, first, last, flags);
}
int close_range(unsigned first, unsigned last, int flags) {
  if (protected_fd(g_fd) && (unsigned)g_fd >= first && (unsigned)g_fd <= last) {
    int r = close_range_sys(first, (unsigned)g_fd - 1, flags);
    return r ? r : close_range_sys((unsigned)g_fd + 1, last, flags);
  }
  return close_range_sys(first, last, flags);
}
void closefrom(int low) { close_range(low < 0 ? 0 : (unsigned)low, ~0U, 0); }
#endif

static uint64_t parse_num(const char *s, const char **end) {
  char *e;
  errno = 0;
  uint64_t v = strtoull(s, &e, 0);
  if (e == s || errno)
    die("bad number in PMSIMTRACE_PM");
  *end = e;
  return v;
}

static void heap_init(void);
static void thread_end(void *);
static pthread_key_t g_end_key;
static void untraced(const char *out);

/* `pmsim trace record` learns which processes ran instrumented, and whether the traced one
 * flushed lines without storing to PM, from lines appended to PMSIM_TRACE_REPORT:
 * "traced PID ARGV0", "untraced PID ARGV0" and, when the trace ends, "flushes PID F P S" (F: it
 * flushed lines; P: one of them was PM; S: it stored to PM; each 0 or 1). */
static void report(const char *what) {
  const char *path = getenv("PMSIM_TRACE_REPORT");
  if (!path || !*path)
    return;
  char line[600];
  int n;
  if (!strcmp(what, "flushes"))
    n = snprintf(line, sizeof line, "flushes %d %d %d %d\n", (int)g_pid, atomic_load(&g_seen_flush),
                 atomic_load(&g_seen_pm_flush), atomic_load(&g_seen_pm_store));
  else
    n = snprintf(line, sizeof line, "%s %d %.500s\n", what, (int)syscall(SYS_getpid), program_invocation_name);
  if (n <= 0)
    return;
  if (n >= (int)sizeof line)
    n = sizeof line - 1;
  for (int i = 0; i < n - 1; i++)
    if (line[i] == '\n')
      line[i] = '?';
  line[n - 1] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  if (write(fd, line, (size_t)n) < 0) {
  }
  syscall(SYS_close, fd);
}

/* This process found the trace file made by another: it runs untraced and says so. */
static void untraced(const char *out) {
  report("untraced");
  char msg[1200];
  int n;
  if (getenv("PMSIM_TRACE_REPORT"))
    n = snprintf(msg, sizeof msg,
                 "pmsim: warning: tracer runtime: %.300s (pid %d) runs untraced: another process started by "
                 "the same 'pmsim trace record' writes the trace (one process per trace: record each "
                 "program with its own 'pmsim trace record')\n",
                 program_invocation_name, (int)g_pid);
  else
    n = snprintf(msg, sizeof msg,
                 "pmsim: warning: tracer runtime: %.300s (pid %d) runs untraced: the trace file %.400s exists "
                 "(another traced process writes it, or an earlier run left it)\n",
                 program_invocation_name, (int)g_pid, out);
  if (n > 0 && write(2, msg, (size_t)(n < (int)sizeof msg ? n : (int)sizeof msg - 1)) < 0) {
  }
}

/* A forked child does not trace (it would interleave its events into the parent's file). */
static void child_off(void) {
  g_on = 0;
  g_finished = 1;
  g_child = 1;
}

__attribute__((constructor(101))) static void pmt_init(void) {
  const char *out = getenv("PMSIM_TRACE_OUT");
  if (!out || !*out)
    return;
  const char *pm = getenv("PMSIM_TRACE_PM");
  if (!pm || !strcmp(pm, "heap")) {
    g_mode = PM_HEAP;
  } else if (!strncmp(pm, "dax:", 4)) {
    g_mode = PM_DAX;
    if (!realpath(pm + 4, g_dax_dir))
      die("the --pm dax directory does not exist");
  } else if (!strcmp(pm, "pmdk")) {
    g_mode = PM_PMDK;
  } else if (!strncmp(pm, "range:", 6)) {
    const char *e;
    uint64_t base = parse_num(pm + 6, &e);
    if (*e != ':')
      die("PMSIM_TRACE_PM range needs range:ADDR:SIZE");
    uint64_t size = parse_num(e + 1, &e);
    g_mode = PM_RANGE;
    add_range(base, size, 0);
  } else {
    die("PMSIM_TRACE_PM must be heap, dax:DIR, pmdk or range:ADDR:SIZE");
  }
  const char *vol = getenv("PMSIM_TRACE_VOLATILE");
  g_drop_volatile = vol && !strcmp(vol, "drop");
  const char *comp = getenv("PMSIM_TRACE_COMPUTE");
  g_count_compute = !comp || strcmp(comp, "drop");
  g_pid = (pid_t)syscall(SYS_getpid);
  /* One process per trace: the first instrumented process to start creates the file; any other
   * (started alongside it or after it, by a shell, by exec or by the program itself) finds it and
   * runs untraced, saying so, rather than truncate or interleave the first one's trace. */
  g_fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (g_fd < 0 && errno == EEXIST) {
    untraced(out);
    return;
  }
  if (g_fd < 0)
    die("cannot create the trace file");
  report("traced");
  /* Out of the way of the program's own descriptors (see close() below). */
  int high = fcntl(g_fd, F_DUPFD_CLOEXEC, 1000);
  if (high >= 0) {
    syscall(SYS_close, g_fd);
    g_fd = high;
  }
  uint8_t hdr[36];
  memcpy(hdr, "PMSIMTRB", 8);
  uint16_t version = 2, flags = 0;
  uint32_t threads = 1, npm = 1;
  uint64_t base = PM_WINDOW, size = PM_WINDOW_SIZE;
  memcpy(hdr + 8, &version, 2);
  memcpy(hdr + 10, &flags, 2);
  memcpy(hdr + 12, &threads, 4);
  memcpy(hdr + 16, &npm, 4);
  memcpy(hdr + 20, &base, 8);
  memcpy(hdr + 28, &size, 8);
  write_all(hdr, 36);
  const char *meta = getenv("PMSIM_TRACE_META");
  const char *meta_file = getenv("PMSIM_TRACE_META_FILE");
  g_on = 1;
  if (meta && *meta)
    write_meta(meta);
  if (meta_file && *meta_file)
    write_meta_file(meta_file);
  if (pthread_key_create(&g_end_key, thread_end))
    die("cannot create the thread-end key (pthread_key_create)");
  pthread_atfork(NULL, NULL, child_off);
  if (g_mode == PM_HEAP)
    heap_init();
  atexit(on_exit_hook);
  at_quick_exit(on_exit_hook);
  /* Signals that end the program: the trace is written (marked incomplete) first. One the
   * program inherited as ignored (nohup) stays ignored; the program may set its own later. */
  int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    struct sigaction old;
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
      signal(sigs[i], on_crash);
  }
}

/* ---------- the PM heap (--pm heap) ----------
 * Every malloc/new of the program comes from one region, which is the PM range: programs that
 * emulate PM with the heap (FAST_FAIR, CCEH) then trace their nodes as persistent. Size classes
 * are powers of two (16 B .. 32 KiB) carved from 64 KiB chunks, so blocks are aligned to their
 * class; larger blocks take whole chunks, starting at a multiple of their alignment (up to
 * HEAP_MAX_ALIGN: the heap itself is aligned to it; the chunks skipped to get there are free).
 * Freed blocks are reused (per class; large: first fit).
 */
#define CHUNK (64 * 1024ULL)
#define HEAP_MAX_ALIGN (1ULL << 30)
#define HEAP_SIZE PM_WINDOW_SIZE
#define NCHUNKS (HEAP_SIZE / CHUNK)
static uint8_t *g_heap;
static uint64_t g_heap_chunks; /* chunks handed out */
static uint8_t g_chunk_class[NCHUNKS];  /* class+1 for small chunks, 255 = large head */
static uint32_t g_chunk_count[NCHUNKS]; /* large: chunks in the run */
static void *g_free[13];                /* free lists of classes 16 << i */
static uint8_t *g_bump[13], *g_bump_end[13];
struct large_free { struct large_free *next; uint64_t chunks; };
static struct large_free *g_large_free;
static __thread int t_heap_reused; /* the last heap_alloc of this thread reused a freed block */
static atomic_flag g_heap_lock = ATOMIC_FLAG_INIT;

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void heap_init(void) {
  void *p = (void *)syscall(SYS_mmap, (void *)PM_WINDOW, HEAP_SIZE, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  int identity = p == (void *)PM_WINDOW; /* PM_WINDOW is a multiple of HEAP_MAX_ALIGN */
  if (!identity) {
    if (p != MAP_FAILED && (long)p > 0)
      syscall(SYS_munmap, p, HEAP_SIZE);
    /* Elsewhere: aligned to HEAP_MAX_ALIGN (the excess around it given back). */
    uint8_t *q = raw_mmap(HEAP_SIZE + HEAP_MAX_ALIGN);
    if (q == MAP_FAILED)
      die("cannot reserve the 16 GiB PM heap");
    uint8_t *a = (uint8_t *)(((uint64_t)q + HEAP_MAX_ALIGN - 1) & ~(HEAP_MAX_ALIGN - 1));
    if (a > q)
      syscall(SYS_munmap, q, (size_t)(a - q));
    syscall(SYS_munmap, a + HEAP_SIZE, (size_t)(q + HEAP_MAX_ALIGN - a));
    p = a;
  }
  g_heap = p;
  add_range((uint64_t)p, HEAP_SIZE, identity);
}

static inline int in_heap(const void *p) { return g_heap && (uint64_t)((const uint8_t *)p - g_heap) < HEAP_SIZE; }

static void *heap_alloc(size_t n, size_t align) {
  if (n == 0)
    n = 1;
  if (align < 16)
    align = 16;
  size_t want = n > align ? n : align;
  t_heap_reused = 0;
  spin_lock(&g_heap_lock);
  void *r = NULL;
  if (want <= 32768 && align <= 32768) {
    unsigned c = 0;
    while ((16u << c) < want)
      c++;
    if (g_free[c]) {
      r = g_free[c];
      g_free[c] = *(void **)r;
      t_heap_reused = 1;
    } else {
      if (g_bump[c] == g_bump_end[c]) {
        if (g_heap_chunks >= NCHUNKS)
          goto out;
        g_chunk_class[g_heap_chunks] = (uint8_t)(c + 1);
        g_bump[c] = g_heap + g_heap_chunks * CHUNK;
        g_bump_end[c] = g_bump[c] + CHUNK;
        g_heap_chunks++;
      }
      r = g_bump[c];
      g_bump[c] += 16u << c;
    }
  } else {
    uint64_t chunks = (n + CHUNK - 1) / CHUNK;
    uint64_t step = align > CHUNK ? align / CHUNK : 1; /* the block starts at a multiple */
    if (align > HEAP_MAX_ALIGN) {
      spin_unlock(&g_heap_lock);
      static atomic_int warned;
      if (!atomic_exchange(&warned, 1)) {
        char msg[200];
        int len = snprintf(msg, sizeof msg,
                           "pmsim: warning: tracer runtime: the PM heap (--pm heap) aligns blocks to at most 1 GiB; "
                           "an allocation aligned to %zu returns NULL\n", align);
        if (len > 0 && write(2, msg, (size_t)len) < 0) {
        }
      }
      errno = ENOMEM;
      return NULL;
    }
    for (struct large_free **pp = &g_large_free; *pp; pp = &(*pp)->next) {
      struct large_free *f = *pp;
      uint64_t idx = ((uint8_t *)f - g_heap) / CHUNK, at = (idx + step - 1) / step * step;
      if (at + chunks > idx + f->chunks)
        continue;
      /* The run minus the block: what is before it (f itself) and after it stay free. */
      uint64_t after = idx + f->chunks - (at + chunks);
      if (at > idx)
        f->chunks = at - idx;
      else
        *pp = f->next;
      if (after) {
        struct large_free *rest = (struct large_free *)(g_heap + (at + chunks) * CHUNK);
        rest->chunks = after;
        rest->next = *pp;
        *pp = rest;
      }
      g_chunk_class[at] = 255;
      g_chunk_count[at] = (uint32_t)chunks;
      r = g_heap + at * CHUNK;
      t_heap_reused = 1;
      goto out;
    }
    uint64_t at = (g_heap_chunks + step - 1) / step * step;
    if (at > NCHUNKS || chunks > NCHUNKS - at)
      goto out;
    if (at > g_heap_chunks) { /* the chunks skipped are a free run */
      struct large_free *gap = (struct large_free *)(g_heap + g_heap_chunks * CHUNK);
      gap->chunks = at - g_heap_chunks;
      gap->next = g_large_free;
      g_large_free = gap;
    }
    g_chunk_class[at] = 255;
    g_chunk_count[at] = (uint32_t)chunks;
    r = g_heap + at * CHUNK;
    g_heap_chunks = at + chunks;
  }
out:
  spin_unlock(&g_heap_lock);
  if (!r)
    errno = ENOMEM;
  return r;
}

static size_t heap_size(const void *p) {
  uint64_t idx = (uint64_t)((const uint8_t *)p - g_heap) / CHUNK;
  uint8_t c = g_chunk_class[idx];
  return c == 255 ? g_chunk_count[idx] * CHUNK : (size_t)16 << (c - 1);
}

static void heap_free(void *p) {
  uint64_t idx = (uint64_t)((uint8_t *)p - g_heap) / CHUNK;
  spin_lock(&g_heap_lock);
  uint8_t c = g_chunk_class[idx];
  if (c == 255) {
    struct large_free *f = p;
    f->chunks = g_chunk_count[idx];
    f->next = g_large_free;
    g_large_free = f;
  } else {
    *(void **)p = g_free[c - 1];
    g_free[c - 1] = p;
  }
  spin_unlock(&g_heap_lock);
}

static inline int heap_on(void) { return g_on && g_mode == PM_HEAP && g_heap; }

/* What is not the PM heap's goes to the allocator the program would use without the tracer:
 * the next definition after these (an allocator library it links or preloads, jemalloc,
 * tcmalloc, mimalloc; else libc's). Forwarding to libc's directly broke such a program: the
 * library's own `operator new` allocated from it while the library's `operator delete` ended
 * here, in libc's free. Looked up once (dlsym); what dlsym itself allocates meanwhile comes
 * from a static buffer whose blocks are never freed. */
struct next_alloc {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*memalign)(size_t, size_t);
};
static struct next_alloc g_next_store;
static struct next_alloc *_Atomic g_next;
static __thread int t_resolving_alloc;
static _Alignas(16) uint8_t g_boot_buf[16384];
static atomic_size_t g_boot_used;

static void *boot_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  size_t at = atomic_fetch_add(&g_boot_used, n);
  if (n > sizeof g_boot_buf || at > sizeof g_boot_buf - n)
    return NULL;
  return g_boot_buf + at;
}
static inline int in_boot(const void *p) {
  return (uint64_t)((const uint8_t *)p - g_boot_buf) < sizeof g_boot_buf;
}

static struct next_alloc *next_alloc(void) {
  struct next_alloc *n = atomic_load_explicit(&g_next, memory_order_acquire);
  if (n || t_resolving_alloc)
    return n;
  t_resolving_alloc = 1;
  struct next_alloc r = {
      (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc"),
      (void (*)(void *))dlsym(RTLD_NEXT, "free"),
      (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc"),
      (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc"),
      (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign"),
  };
  if (!r.memalign) /* the same (alignment, size) contract where memalign is not exported */
    r.memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  /* All from one allocator or none: libc's (a static link, an allocator without memalign). */
  if (!r.malloc || !r.free || !r.calloc || !r.realloc || !r.memalign)
    r = (struct next_alloc){__libc_malloc, __libc_free, __libc_calloc, __libc_realloc, __libc_memalign};
  /* Threads that race here store the same functions. */
  g_next_store = r;
  atomic_store_explicit(&g_next, &g_next_store, memory_order_release);
  t_resolving_alloc = 0;
  return &g_next_store;
}

/* Weak, as the PMDK wrappers: a program with an allocator of its own (malloc, free, calloc,
 * realloc defined in it) links, and its definitions win. Its memory is then what its allocator
 * carves (from a static arena, from mmap), which is not the PM heap. */
#define ALLOC_FN __attribute__((weak))

ALLOC_FN void *malloc(size_t n) {
  if (heap_on())
    return heap_alloc(n, 16);
  struct next_alloc *a = next_alloc();
  return a ? a->malloc(n) : boot_alloc(n);
}
ALLOC_FN void free(void *p) {
  if (!p || in_boot(p))
    return;
  if (in_heap(p)) {
    heap_free(p);
    return;
  }
  struct next_alloc *a = next_alloc();
  if (a)
    a->free(p);
}
ALLOC_FN void *calloc(size_t a, size_t b) {
  if (!heap_on()) {
    struct next_alloc *x = next_alloc();
    if (x)
      return x->calloc(a, b);
    if (b && a > SIZE_MAX / b)
      return NULL;
    return boot_alloc(a * b); /* static: zero */
  }
  if (b && a > SIZE_MAX / b) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = heap_alloc(a * b, 16);
  if (p) {
    memset(p, 0, a * b);
    /* A reused block held data: its zeroing is stores to PM like any other. A fresh one reads
     * zero in the trace already (as in the program), so libc's own callocs add nothing. */
    if (t_heap_reused)
      mem_access(K_STORE, p, a * b, 1);
  }
  return p;
}
ALLOC_FN void *realloc(void *p, size_t n) {
  if (!p)
    return malloc(n);
  if (in_boot(p)) { /* dlsym's, moved to the program's allocator (its size is not kept: at most the rest) */
    void *q = malloc(n);
    size_t room = sizeof g_boot_buf - (size_t)((uint8_t *)p - g_boot_buf);
    if (q)
      memcpy(q, p, n < room ? n : room);
    return q;
  }
  if (!in_heap(p)) {
    struct next_alloc *a = next_alloc();
    return a ? a->realloc(p, n) : NULL;
  }
  if (n == 0) { /* as glibc: the block is freed and NULL returned */
    heap_free(p);
    return NULL;
  }
  size_t old = heap_size(p);
  if (n <= old)
    return p;
  void *q = heap_alloc(n, 16);
  if (q) {
    /* The move is the program's loads and stores (the runtime is not instrumented). */
    memcpy(q, p, old);
    mem_access(K_LOAD, p, old, 0);
    mem_access(K_STORE, q, old, 1);
    heap_free(p);
  }
  return q;
}
ALLOC_FN void *memalign(size_t align, size_t n) {
  if (!heap_on()) {
    struct next_alloc *a = next_alloc();
    return a ? a->memalign(align, n) : NULL;
  }
  if (align > SIZE_MAX / 2 + 1) { /* as glibc */
    errno = EINVAL;
    return NULL;
  }
  size_t a = 1; /* as glibc: an alignment that is not a power of two is rounded up to one */
  while (a < align)
    a <<= 1;
  return heap_alloc(n, a);
}
ALLOC_FN void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
ALLOC_FN int posix_memalign(void **out, size_t align, size_t n) {
  if (!align || align % sizeof(void *) || (align & (align - 1)))
    return EINVAL; /* as glibc: a power-of-two multiple of sizeof(void *) */
  void *p = memalign(align, n);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}
ALLOC_FN void *valloc(size_t n) { return memalign(4096, n); }
ALLOC_FN void *pvalloc(size_t n) { /* as glibc: whole pages, at least one */
  if (n > SIZE_MAX - 4095) {
    errno = ENOMEM;
    return NULL;
  }
  return memalign(4096, n ? (n + 4095) & ~(size_t)4095 : 4096);
}

/* ---------- mmap (--pm dax:DIR) ---------- */

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  void *r = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (r == MAP_FAILED) /* syscall() has set errno */
    return MAP_FAILED;
  if (g_on && fd >= 0) {
    /* MAP_FIXED over a PM mapping replaces it. */
    if (flags & MAP_FIXED)
      drop_ranges((uint64_t)r, len);
    int pm = 0;
    if (g_mode == PM_DAX) {
      char link[64], path[4096];
      snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
      ssize_t n = readlink(link, path, sizeof path - 1);
      size_t dl = strlen(g_dax_dir);
      /* A private mapping is a copy-on-write copy: its stores never reach the file. */
      if (n > 0 && (flags & MAP_SHARED)) {
        path[n] = 0;
        /* DIR itself or a path below it (DIR "/", realpath's only result ending in '/',
         * holds every file). */
        pm = !strncmp(path, g_dax_dir, dl) &&
             (path[dl] == '/' || path[dl] == 0 || (dl > 0 && g_dax_dir[dl - 1] == '/'));
      }
    } else if (g_mode == PM_PMDK) {
      /* A pool's (or a poolset's parts') shared file mappings; private ones are copies. */
      pm = t_mapping_pool && (flags & MAP_SHARED);
    }
    if (pm)
      add_file_range((uint64_t)r, len, fd, (uint64_t)off);
  }
  return r;
}
int munmap(void *addr, size_t len) {
  int r = (int)syscall(SYS_munmap, addr, len);
  if (r == 0 && g_on && g_mode != PM_HEAP && g_mode != PM_RANGE)
    drop_ranges((uint64_t)addr, len);
  return r;
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

/* ---------- pthreads ---------- */


/* A lock (or wait) is an acquire once it succeeded; an unlock (post, signal, arrival) a
 * release before it lets another thread on. */
#define ACQUIRE_ON_SUCCESS(ret, name, obj, size, params, args) \
  ret name params { \
    REAL(name); \
    ret r = real_##name args; \
    if (r == 0) \
      sync_ev(K_ACQUIRE, obj, size, 0); \
    return r; \
  }
#define RELEASE_BEFORE(ret, name, obj, size, params, args) \
  ret name params { \
    REAL(name); \
    sync_ev(K_RELEASE, obj, size, 0); \
    return real_##name args; \
  }

ACQUIRE_ON_SUCCESS(int, pthread_mutex_lock, m, 8, (pthread_mutex_t *m), (m))
ACQUIRE_ON_SUCCESS(int, pthread_mutex_trylock, m, 8, (pthread_mutex_t *m), (m))
RELEASE_BEFORE(int, pthread_mutex_unlock, m, 8, (pthread_mutex_t *m), (m))
/* A thread cancelled in a condition wait takes the mutex again before it unwinds (its cleanup
 * handlers run holding it): that is its acquire. */
static void cond_wait_cancelled(void *m) { sync_ev(K_ACQUIRE, m, 8, 0); }
int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
  REAL(pthread_cond_wait);
  sync_ev(K_RELEASE, m, 8, 0);
  int r;
  pthread_cleanup_push(cond_wait_cancelled, m);
  r = real_pthread_cond_wait(c, m);
  pthread_cleanup_pop(0);
  sync_ev(K_ACQUIRE, c, 8, 0);
  sync_ev(K_ACQUIRE, m, 8, 0);
  return r;
}
int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts) {
  REAL(pthread_cond_timedwait);
  sync_ev(K_RELEASE, m, 8, 0);
  int r;
  pthread_cleanup_push(cond_wait_cancelled, m);
  r = real_pthread_cond_timedwait(c, m, ts);
  pthread_cleanup_pop(0);
  sync_ev(K_ACQUIRE, c, 8, 0);
  sync_ev(K_ACQUIRE, m, 8, 0);
  return r;
}
RELEASE_BEFORE(int, pthread_cond_signal, c, 8, (pthread_cond_t *c), (c))
RELEASE_BEFORE(int, pthread_cond_broadcast, c, 8, (pthread_cond_t *c), (c))

/* The other blocking primitives order threads as a mutex does: what one thread did before it
 * unlocks, posts or arrives happens before what another does after it locks, waits or leaves.
 * Their code is in libc (not instrumented), so without these the trace would not order the
 * threads there at all: the engine could replay a reader ahead of the writer it waited for, and
 * the checker would not require the writer's persists before the reader's. Releases of one
 * address are ordered among themselves (each writes the word), so an acquire after a barrier
 * follows every thread's arrival, and an acquire of a semaphore follows every earlier post. */
ACQUIRE_ON_SUCCESS(int, pthread_mutex_timedlock, m, 8,
                   (pthread_mutex_t *m, const struct timespec *ts), (m, ts))
ACQUIRE_ON_SUCCESS(int, pthread_rwlock_rdlock, l, 8, (pthread_rwlock_t *l), (l))
ACQUIRE_ON_SUCCESS(int, pthread_rwlock_wrlock, l, 8, (pthread_rwlock_t *l), (l))
ACQUIRE_ON_SUCCESS(int, pthread_rwlock_tryrdlock, l, 8, (pthread_rwlock_t *l), (l))
ACQUIRE_ON_SUCCESS(int, pthread_rwlock_trywrlock, l, 8, (pthread_rwlock_t *l), (l))
ACQUIRE_ON_SUCCESS(int, pthread_rwlock_timedrdlock, l, 8,
                   (pthread_rwlock_t *l, const struct timespec *ts), (l, ts))
ACQUIRE_ON_SUCCESS(int, pthread_rwlock_timedwrlock, l, 8,
                   (pthread_rwlock_t *l, const struct timespec *ts), (l, ts))
RELEASE_BEFORE(int, pthread_rwlock_unlock, l, 8, (pthread_rwlock_t *l), (l))
/* A spinlock is a 4-byte int. */
ACQUIRE_ON_SUCCESS(int, pthread_spin_lock, (const void *)l, 4, (pthread_spinlock_t *l), (l))
ACQUIRE_ON_SUCCESS(int, pthread_spin_trylock, (const void *)l, 4, (pthread_spinlock_t *l), (l))
RELEASE_BEFORE(int, pthread_spin_unlock, (const void *)l, 4, (pthread_spinlock_t *l), (l))
ACQUIRE_ON_SUCCESS(int, sem_wait, s, 8, (sem_t *s), (s))
ACQUIRE_ON_SUCCESS(int, sem_trywait, s, 8, (sem_t *s), (s))
ACQUIRE_ON_SUCCESS(int, sem_timedwait, s, 8, (sem_t *s, const struct timespec *ts), (s, ts))
RELEASE_BEFORE(int, sem_post, s, 8, (sem_t *s), (s))

int pthread_barrier_wait(pthread_barrier_t *b) {
  REAL(pthread_barrier_wait);
  sync_ev(K_RELEASE, b, 8, 0);
  int r = real_pthread_barrier_wait(b);
  if (r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD)
    sync_ev(K_ACQUIRE, b, 8, 0);
  return r;
}

struct start { void *(*fn)(void *); void *arg; uint64_t gen; };

/* A created thread ends: the release pthread_join acquires, then its slot is free. This is the
 * destructor of a thread-specific key every created thread sets (g_end_key), so it runs however
 * the thread ends (a return from its start function, pthread_exit, a cancellation) and after
 * what the thread still does as it ends: glibc runs C++ thread_local destructors
 * (__call_tls_dtors) before the keys' destructors, and the keys' destructors in rounds of
 * ascending key, each round calling those whose value is set. The key sets itself again for the
 * next round, up to the last of PTHREAD_DESTRUCTOR_ITERATIONS, so the end comes after every
 * other key's destructor (unless one also runs in every round). */
static __thread unsigned t_end_round;

static void thread_end(void *v) {
  if (++t_end_round < PTHREAD_DESTRUCTOR_ITERATIONS && pthread_setspecific(g_end_key, v) == 0)
    return;
  sync_ev(K_RELEASE, (void *)pthread_self(), 8, 0);
  end_slot();
}

static void *thread_start(void *p) {
  struct start s = *(struct start *)p;
  t_created_gen = s.gen;
  sync_ev(K_ACQUIRE, p, 8, 0); /* synchronises with the creator's release */
  __libc_free(p);
  pthread_setspecific(g_end_key, (void *)1);
  return s.fn(s.arg);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  REAL(pthread_create);
  if (!g_on)
    return real_pthread_create(t, attr, fn, arg);
  struct start *s = __libc_malloc(sizeof *s);
  s->fn = fn;
  s->arg = arg;
  spin_lock(&g_slot_lock);
  s->gen = g_free_gen; /* the slots freed so far were joined before this thread was created */
  spin_unlock(&g_slot_lock);
  sync_ev(K_RELEASE, s, 8, 0);
  int r = real_pthread_create(t, attr, thread_start, s);
  if (r != 0)
    __libc_free(s);
  return r;
}

int pthread_join(pthread_t t, void **ret) {
  REAL(pthread_join);
  /* A joiner may wait for long (main joining its workers): its buffered events go out now, so
   * a SIGKILL meanwhile does not cut the trace at its first one (steal_old() covers the rest). */
  if (!t_busy && t_buf && t_buf->count) {
    struct tbuf *b = enter();
    if (b) {
      flush_buf(b);
      leave(b);
    }
  }
  int r = real_pthread_join(t, ret);
  if (r == 0) {
    sync_ev(K_ACQUIRE, (void *)t, 8, 0);
    free_slot(t);
  }
  return r;
}

static int is_pm_addr(uint64_t a) {
  int pm;
  translate(a, &pm);
  return pm;
}

/* ---------- libpmem / libpmemobj (--pm pmdk) ----------
 * libpmem is not instrumented, so each call is described by its effect: stores of the bytes it
 * wrote (read back after the call), the flushes it executes, and an sfence where it drains.
 * Calls libpmem makes to itself are not traced twice (t_in_hook).
 */

/* How PMDK flushes on x86-64, chosen as libpmem's pmem_init and libpmem2's pmem2_arch_init and
 * pmem2_persist_init choose it once at start-up (PMDK 1.12: src/libpmem/pmem.c,
 * src/libpmem2/x86_64/init.c, src/libpmem2/persist.c; checked against Debian's 1.12.1):
 * - the flush instruction (both libraries): clwb when the CPU has it, else clflushopt, else
 *   clflush; PMEM_NO_CLWB=1 and PMEM_NO_CLFLUSHOPT=1 (exactly "1") pass over the first two;
 * - libpmem only, `noflush`: with PMEM_NO_FLUSH=1, or when pmem_has_auto_flush() finds eADR
 *   and PMEM_NO_FLUSH is not 0, its flush is an empty function (pmem_flush and pmem_persist's
 *   flush execute nothing; pmem_deep_flush still flushes) and its copies take their _eadr
 *   variants (below); libpmem2 does not read PMEM_NO_FLUSH, a map's store granularity says
 *   (BYTE on eADR, or with PMEM2_FORCE_GRANULARITY=BYTE);
 * - libpmem's drain: an sfence, none when it flushes with clflush (ordered by itself) and
 *   not noflush; libpmem2's drain is always an sfence;
 * - non-temporal copies unless PMEM_NO_MOVNT=1 (then its generic copy: plain stores and the
 *   flush), from PMEM_MOVNT_THRESHOLD bytes (atoll; default 256, a negative value ignored). */
struct pmdk_cfg {
  unsigned flush; /* K_CLWB, K_CLFLUSHOPT or K_CLFLUSH */
  int noflush;    /* libpmem: no flush (PMEM_NO_FLUSH=1, or eADR) */
  int movnt;      /* non-temporal copies available */
  size_t threshold;
};
static int env_is(const char *name, const char *value) {
  const char *e = getenv(name);
  return e && strcmp(e, value) == 0;
}
static struct pmdk_cfg pmdk_cfg(void) {
  static struct pmdk_cfg c;
  static atomic_int known;
  static atomic_flag lock = ATOMIC_FLAG_INIT;
  if (atomic_load_explicit(&known, memory_order_acquire))
    return c;
  spin_lock(&lock);
  if (!atomic_load_explicit(&known, memory_order_relaxed)) {
    unsigned a = 0, b = 0, cx = 0, d = 0;
    int clflushopt = 0, clwb = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
      clflushopt = (b >> 23) & 1;
      clwb = (b >> 24) & 1;
    }
    c.flush = K_CLFLUSH;
    if (clflushopt && !env_is("PMEM_NO_CLFLUSHOPT", "1"))
      c.flush = K_CLFLUSHOPT;
    if (clwb && !env_is("PMEM_NO_CLWB", "1"))
      c.flush = K_CLWB;
    if (env_is("PMEM_NO_FLUSH", "1"))
      c.noflush = 1;
    else if (env_is("PMEM_NO_FLUSH", "0"))
      c.noflush = 0;
    else {
      /* libpmem's own eADR test (pmem2_auto_flush), when libpmem is loaded */
      int (*auto_flush)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "pmem_has_auto_flush");
      c.noflush = auto_flush && auto_flush() == 1;
    }
    c.movnt = !env_is("PMEM_NO_MOVNT", "1");
    const char *th = getenv("PMEM_MOVNT_THRESHOLD");
    long long v = th ? atoll(th) : -1;
    c.threshold = v >= 0 ? (size_t)v : 256;
    atomic_store_explicit(&known, 1, memory_order_release);
  }
  spin_unlock(&lock);
  return c;
}

/* A flush of `kind` per line of [addr, addr + len). */
static void flush_lines(unsigned kind, const void *addr, size_t len) {
  uint64_t a = (uint64_t)addr & ~(LINE - 1), end = (uint64_t)addr + len;
  for (; a < end; a += LINE)
    flush_ev(kind, (const void *)a);
}

/* libpmem's flush (pmem_flush, and the flush of pmem_persist) and drain. */
static void lp_flush(const void *addr, size_t len) {
  struct pmdk_cfg c = pmdk_cfg();
  if (!c.noflush)
    flush_lines(c.flush, addr, len);
}
static void lp_drain(void) {
  struct pmdk_cfg c = pmdk_cfg();
  if (c.noflush || c.flush != K_CLFLUSH)
    fence_ev(K_SFENCE);
}

static size_t page_size(void) {
  static size_t ps;
  if (!ps) {
    long v = sysconf(_SC_PAGESIZE);
    ps = v > 0 ? (size_t)v : 4096;
  }
  return ps;
}

/* The write-back of an msync of [addr, addr + len) (the program's own, pmem_msync's, libpmem2's
 * on a page-granularity map, libpmemobj's on a pool that is not pmem): the kernel writes back
 * every dirty line of whole pages, [addr rounded down, addr + len rounded up to the page size).
 * In the trace, a clwb per line of [addr, addr + len) (`range` 1: as flush_lines; 2: its PM
 * lines only; 0: none), and one per line of those pages the program stored to since the line
 * was last flushed (the dirty bits above; a line it never stored to, or already flushed, is
 * left out: a range of many pages adds at most two pages' worth of lines). Returns how many PM
 * lines it flushed. */
static uint64_t msync_lines(const void *addr, size_t len, int range) {
  uint64_t ps = page_size(), from = (uint64_t)addr, to = from + len;
  uint64_t a = from & ~(ps - 1), end = (to + ps - 1) & ~(ps - 1), n = 0;
  if (!len)
    return 0;
  for (; a < end; a += LINE) {
    int pm;
    uint64_t t = translate(a, &pm);
    int in = a + LINE > from && a < to;
    if ((in && range == 1) || (pm && ((in && range == 2) || dirty_test(t)))) {
      flush_ev(K_CLWB, (const void *)a);
      n += pm;
    }
  }
  return n;
}

/* The PMDK wrappers are weak: a program that defines a function of the same name itself (research
 * code often ships its own pmem_persist/pmem_flush, e.g. Intel's pre-PMDK linux-examples) links
 * and runs its own, whose flushes and fences the pass then traces as the program's. */
#define PMDK_WRAPPER __attribute__((weak))

#define PMEM_REAL(ret, name, ...) \
  static ret (*real_##name)(__VA_ARGS__); \
  if (!real_##name) \
    real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name); \
  if (!real_##name) \
    die("PMDK function " #name " not found (link with its library: -lpmem, -lpmem2 or -lpmemobj)");

PMDK_WRAPPER void *pmem_map_file(const char *path, size_t len, int flags, mode_t mode, size_t *mapped, int *is_pmem) {
  PMEM_REAL(void *, pmem_map_file, const char *, size_t, int, mode_t, size_t *, int *);
  size_t m = 0;
  t_mapping_pool++;
  void *r = real_pmem_map_file(path, len, flags, mode, &m, is_pmem);
  t_mapping_pool--;
  if (mapped)
    *mapped = m;
  if (r && g_on && g_mode == PM_PMDK && !is_pm_addr((uint64_t)r))
    add_range((uint64_t)r, m, 0);
  return r;
}

#define PMEM_WRAP_BEGIN \
  int outer = !t_in_hook; \
  t_in_hook++;
#define PMEM_WRAP_END t_in_hook--;

PMDK_WRAPPER void pmem_flush(const void *addr, size_t len) {
  PMEM_REAL(void, pmem_flush, const void *, size_t);
  PMEM_WRAP_BEGIN
  real_pmem_flush(addr, len);
  if (outer)
    lp_flush(addr, len);
  PMEM_WRAP_END
}
/* pmem_deep_flush writes the range's lines back with the CPU's flush, also when libpmem does not
 * flush otherwise (its deep_flush is never the empty one), and, on device DAX, flushes the WPQ,
 * which ADR makes persistent anyway; it does not fence. */
PMDK_WRAPPER void pmem_deep_flush(const void *addr, size_t len) {
  PMEM_REAL(void, pmem_deep_flush, const void *, size_t);
  PMEM_WRAP_BEGIN
  real_pmem_deep_flush(addr, len);
  if (outer)
    flush_lines(pmdk_cfg().flush, addr, len);
  PMEM_WRAP_END
}
PMDK_WRAPPER void pmem_drain(void) {
  PMEM_REAL(void, pmem_drain, void);
  PMEM_WRAP_BEGIN
  real_pmem_drain();
  if (outer)
    lp_drain();
  PMEM_WRAP_END
}
PMDK_WRAPPER void pmem_persist(const void *addr, size_t len) {
  PMEM_REAL(void, pmem_persist, const void *, size_t);
  PMEM_WRAP_BEGIN
  real_pmem_persist(addr, len);
  if (outer) {
    lp_flush(addr, len);
    lp_drain();
  }
  PMEM_WRAP_END
}
/* pmem_msync: msync(MS_SYNC) of the range's pages, whatever PMEM_NO_FLUSH says. */
PMDK_WRAPPER int pmem_msync(const void *addr, size_t len) {
  PMEM_REAL(int, pmem_msync, const void *, size_t);
  PMEM_WRAP_BEGIN
  int r = real_pmem_msync(addr, len);
  if (outer) {
    msync_lines(addr, len, 1);
    fence_ev(K_SFENCE);
  }
  PMEM_WRAP_END
  return r;
}

/* msync(MS_SYNC) of a file mapping is how a program without PMDK makes its stores durable;
 * on PM (a DAX mapping) it writes back the dirty lines of the range's pages and waits, which is
 * what the trace says: a clwb per PM line of the range and per line of its pages the program
 * stored to since its last flush (msync_lines), and an sfence. MS_ASYNC schedules nothing the
 * program waits for (a no-op since Linux 2.6.19). libpmem's own msync (inside pmem_msync) is
 * already described by that wrapper (t_in_hook). */
int msync(void *addr, size_t len, int flags) {
  REAL(msync);
  int r = real_msync(addr, len, flags);
  if (r == 0 && g_on && !t_in_hook && (flags & MS_SYNC) && msync_lines(addr, len, 2))
    fence_ev(K_SFENCE);
  return r;
}

/* libpmem's and libpmem2's flags of a copy/set (the same bits in both). */
#define PMEM_F_MEM_NODRAIN_ (1U << 0)
#define PMEM_F_MEM_NONTEMPORAL_ (1U << 1)
#define PMEM_F_MEM_TEMPORAL_ (1U << 2)
#define PMEM_F_MEM_WC_ (1U << 3) /* write combining: on x86-64 an alias of NONTEMPORAL */
#define PMEM_F_MEM_WB_ (1U << 4) /* write back: temporal */
#define PMEM_F_MEM_NOFLUSH_ (1U << 5)

/* A copy/set as PMDK's x86-64 memmove_nodrain makes it, without the drain (pmem_memmove(3)):
 * - NOFLUSH: plain stores, no flush (and the callers do not drain);
 * - `eadr` (libpmem when it does not flush; libpmem2's byte-granularity maps): NONTEMPORAL
 *   (not WC) as below without the flushes, then an sfence (its _empty variant's barrier);
 *   anything else plain stores and no flush, whatever the length;
 * - else non-temporal when NONTEMPORAL or WC is asked, or no temporal flag and at least the
 *   movnt threshold: ntstores for the whole 64 B lines, plain stores and a flush (of the CPU's
 *   kind) for a partial line at either end (libpmem's aligned movnt loop and its small-copy head
 *   and tail), then an sfence when the flush is clflush (libpmem's drain has none then);
 *   otherwise plain stores and a flush per line;
 * - PMEM_NO_MOVNT=1: the generic copy, plain stores and `generic_flush` per line (libpmem's
 *   flush: none when it does not flush; libpmem2 always the CPU's; 0 = none).
 * Nothing when the length is 0 or a copy's source is its destination. The source's loads
 * (memcpy and memmove alike) come first: a load carries no value, so recording them after the
 * real copy is right even when a memmove's ranges overlap, and a copy reads its source before
 * its stores (as llvm.memmove). */
static void copy_effect(void *dst, const void *src, size_t len, unsigned flags, int eadr, unsigned generic_flush) {
  struct pmdk_cfg c = pmdk_cfg();
  if (!len || src == dst)
    return;
  if (src)
    mem_access(K_LOAD, src, len, 0);
  if (flags & PMEM_F_MEM_NOFLUSH_) {
    mem_access(K_STORE, dst, len, 1);
    return;
  }
  if (!c.movnt) {
    mem_access(K_STORE, dst, len, 1);
    if (generic_flush)
      flush_lines(generic_flush, dst, len);
    return;
  }
  unsigned flush = eadr ? 0 : c.flush;
  int nt;
  if (eadr)
    nt = (flags & PMEM_F_MEM_NONTEMPORAL_) != 0;
  else
    nt = (flags & (PMEM_F_MEM_NONTEMPORAL_ | PMEM_F_MEM_WC_)) ||
         (!(flags & (PMEM_F_MEM_TEMPORAL_ | PMEM_F_MEM_WB_)) && len >= c.threshold);
  uintptr_t a = (uintptr_t)dst, end = a + len;
  uintptr_t mid = (a + 63) & ~(uintptr_t)63, mid_end = end & ~(uintptr_t)63;
  if (!nt || mid >= mid_end) {
    mem_access(K_STORE, dst, len, 1);
    if (flush)
      flush_lines(flush, dst, len);
  } else {
    if (mid > a) {
      mem_access(K_STORE, dst, mid - a, 1);
      if (flush)
        flush_lines(flush, dst, mid - a);
    }
    mem_access(K_NTSTORE, (void *)mid, mid_end - mid, 1);
    if (end > mid_end) {
      mem_access(K_STORE, (void *)mid_end, end - mid_end, 1);
      if (flush)
        flush_lines(flush, (void *)mid_end, end - mid_end);
    }
  }
  if (nt && (eadr || flush == K_CLFLUSH))
    fence_ev(K_SFENCE); /* barrier_after_ntstores */
}

/* A libpmem copy/set: its memmove_nodrain (the _eadr one when it does not flush), then its drain
 * unless NODRAIN or NOFLUSH. */
static void pmem_effect_flags(void *dst, const void *src, size_t len, unsigned flags) {
  struct pmdk_cfg c = pmdk_cfg();
  copy_effect(dst, src, len, flags, c.noflush, c.noflush ? 0 : c.flush);
  if (!(flags & (PMEM_F_MEM_NODRAIN_ | PMEM_F_MEM_NOFLUSH_)))
    lp_drain();
}
static void pmem_effect(void *dst, const void *src, size_t len, int drain) {
  pmem_effect_flags(dst, src, len, drain ? 0 : PMEM_F_MEM_NODRAIN_);
}

PMDK_WRAPPER void *pmem_memcpy_persist(void *d, const void *s, size_t n) {
  PMEM_REAL(void *, pmem_memcpy_persist, void *, const void *, size_t);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memcpy_persist(d, s, n);
  if (outer)
    pmem_effect(d, s, n, 1);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memmove_persist(void *d, const void *s, size_t n) {
  PMEM_REAL(void *, pmem_memmove_persist, void *, const void *, size_t);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memmove_persist(d, s, n);
  if (outer)
    pmem_effect(d, s, n, 1);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memset_persist(void *d, int c, size_t n) {
  PMEM_REAL(void *, pmem_memset_persist, void *, int, size_t);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memset_persist(d, c, n);
  if (outer)
    pmem_effect(d, NULL, n, 1);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memcpy_nodrain(void *d, const void *s, size_t n) {
  PMEM_REAL(void *, pmem_memcpy_nodrain, void *, const void *, size_t);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memcpy_nodrain(d, s, n);
  if (outer)
    pmem_effect(d, s, n, 0);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memmove_nodrain(void *d, const void *s, size_t n) {
  PMEM_REAL(void *, pmem_memmove_nodrain, void *, const void *, size_t);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memmove_nodrain(d, s, n);
  if (outer)
    pmem_effect(d, s, n, 0);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memset_nodrain(void *d, int c, size_t n) {
  PMEM_REAL(void *, pmem_memset_nodrain, void *, int, size_t);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memset_nodrain(d, c, n);
  if (outer)
    pmem_effect(d, NULL, n, 0);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memcpy(void *d, const void *s, size_t n, unsigned flags) {
  PMEM_REAL(void *, pmem_memcpy, void *, const void *, size_t, unsigned);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memcpy(d, s, n, flags);
  if (outer)
    pmem_effect_flags(d, s, n, flags);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memmove(void *d, const void *s, size_t n, unsigned flags) {
  PMEM_REAL(void *, pmem_memmove, void *, const void *, size_t, unsigned);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memmove(d, s, n, flags);
  if (outer)
    pmem_effect_flags(d, s, n, flags);
  PMEM_WRAP_END
  return r;
}
PMDK_WRAPPER void *pmem_memset(void *d, int c, size_t n, unsigned flags) {
  PMEM_REAL(void *, pmem_memset, void *, int, size_t, unsigned);
  PMEM_WRAP_BEGIN
  void *r = real_pmem_memset(d, c, n, flags);
  if (outer)
    pmem_effect_flags(d, NULL, n, flags);
  PMEM_WRAP_END
  return r;
}


/* libpmemobj: pools are registered from their file's size. Its persist calls are not wrapped:
 * libpmemobj makes them through libpmem, whose wrappers above describe them as libpmem executes
 * them: pmemobj_persist / flush / drain (and its memcpy, memset, transactions) on a pmem pool
 * call pmem_persist / pmem_flush / pmem_drain / pmem_memcpy (so PMEM_NO_FLUSH and the rest
 * apply), on a pool that is not pmem pmem_msync (whole pages) and no drain. */
typedef struct pmemobjpool PMEMobjpool;
static void register_pool(void *pop, const char *path) {
  struct stat st;
  if (pop && g_on && g_mode == PM_PMDK && !is_pm_addr((uint64_t)pop) && path && stat(path, &st) == 0)
    add_range((uint64_t)pop, (uint64_t)st.st_size, 0);
}
PMDK_WRAPPER PMEMobjpool *pmemobj_create(const char *path, const char *layout, size_t size, mode_t mode) {
  PMEM_REAL(PMEMobjpool *, pmemobj_create, const char *, const char *, size_t, mode_t);
  t_mapping_pool++;
  PMEMobjpool *p = real_pmemobj_create(path, layout, size, mode);
  t_mapping_pool--;
  register_pool(p, path);
  return p;
}
PMDK_WRAPPER PMEMobjpool *pmemobj_open(const char *path, const char *layout) {
  PMEM_REAL(PMEMobjpool *, pmemobj_open, const char *, const char *);
  t_mapping_pool++;
  PMEMobjpool *p = real_pmemobj_open(path, layout);
  t_mapping_pool--;
  register_pool(p, path);
  return p;
}

/* libpmem2: a map made by pmem2_map_new is PM from its mmap on (as a pool above). The program
 * persists through function pointers it gets from the map (pmem2_get_persist_fn, ...); each
 * getter returns a wrapper that describes the call's effect and calls the map's own function,
 * found by the address it is given (maps of different granularity have different ones). What a
 * map's functions do depends on its store granularity (src/libpmem2/persist.c):
 * - CACHE_LINE: the CPU's flush (pmdk_cfg; PMEM_NO_FLUSH is libpmem's, not read here) and an
 *   sfence to drain;
 * - BYTE (eADR, or PMEM2_FORCE_GRANULARITY=BYTE): no flush; persist and drain are an sfence,
 *   copies are the _eadr ones;
 * - PAGE (not DAX): persist and flush are an msync of the range's pages (msync_lines), copies
 *   and sets are the cache-line ones followed by that msync unless NOFLUSH. The msync's own wait
 *   is recorded as the sfence of persist and of a draining copy; flush and a NODRAIN copy record
 *   none, and drain (a no-op there) an sfence, so that the trace is never stronger than the
 *   program between them. */
struct pmem2_map;
struct pmem2_config;
struct pmem2_source;
typedef void (*pm2_persist_t)(const void *, size_t);
typedef void (*pm2_drain_t)(void);
typedef void *(*pm2_copy_t)(void *, const void *, size_t, unsigned);
typedef void *(*pm2_set_t)(void *, int, size_t, unsigned);
#define MAX_PM2_MAPS 64
enum { PM2_BYTE = 0, PM2_CACHE_LINE = 1, PM2_PAGE = 2 }; /* enum pmem2_granularity */
struct pm2_fns {
  uint64_t base, size;
  pm2_persist_t persist, flush;
  pm2_drain_t drain;
  pm2_copy_t memcpy_, memmove_;
  pm2_set_t memset_;
  int gran;
};
static struct pm2_fns g_pm2[MAX_PM2_MAPS];
static int g_npm2;
static atomic_flag g_pm2_lock = ATOMIC_FLAG_INIT;

PMDK_WRAPPER int pmem2_map_new(struct pmem2_map **map, const struct pmem2_config *cfg, const struct pmem2_source *src) {
  PMEM_REAL(int, pmem2_map_new, struct pmem2_map **, const struct pmem2_config *, const struct pmem2_source *);
  t_mapping_pool++;
  int r = real_pmem2_map_new(map, cfg, src);
  t_mapping_pool--;
  return r;
}

/* The map's functions, registered when the program first asks for one of them. */
static struct pm2_fns *pm2_of_map(struct pmem2_map *map) {
  PMEM_REAL(void *, pmem2_map_get_address, struct pmem2_map *);
  PMEM_REAL(size_t, pmem2_map_get_size, struct pmem2_map *);
  PMEM_REAL(int, pmem2_map_get_store_granularity, struct pmem2_map *);
  PMEM_REAL(pm2_persist_t, pmem2_get_persist_fn, struct pmem2_map *);
  PMEM_REAL(pm2_persist_t, pmem2_get_flush_fn, struct pmem2_map *);
  PMEM_REAL(pm2_drain_t, pmem2_get_drain_fn, struct pmem2_map *);
  PMEM_REAL(pm2_copy_t, pmem2_get_memcpy_fn, struct pmem2_map *);
  PMEM_REAL(pm2_copy_t, pmem2_get_memmove_fn, struct pmem2_map *);
  PMEM_REAL(pm2_set_t, pmem2_get_memset_fn, struct pmem2_map *);
  uint64_t base = (uint64_t)real_pmem2_map_get_address(map), size = real_pmem2_map_get_size(map);
  int gran = real_pmem2_map_get_store_granularity(map);
  spin_lock(&g_pm2_lock);
  struct pm2_fns *f = NULL;
  for (int i = 0; i < g_npm2; i++)
    if (g_pm2[i].base == base)
      f = &g_pm2[i];
  if (!f) {
    if (g_npm2 >= MAX_PM2_MAPS) {
      spin_unlock(&g_pm2_lock);
      die("more than 64 libpmem2 maps");
    }
    f = &g_pm2[g_npm2++];
  }
  *f = (struct pm2_fns){base,
                        size,
                        real_pmem2_get_persist_fn(map),
                        real_pmem2_get_flush_fn(map),
                        real_pmem2_get_drain_fn(map),
                        real_pmem2_get_memcpy_fn(map),
                        real_pmem2_get_memmove_fn(map),
                        real_pmem2_get_memset_fn(map),
                        gran};
  spin_unlock(&g_pm2_lock);
  return f;
}

/* The functions of the map holding addr (the last map's for an address in none). */
static struct pm2_fns pm2_at(const void *addr) {
  spin_lock(&g_pm2_lock);
  struct pm2_fns f = g_npm2 ? g_pm2[g_npm2 - 1] : (struct pm2_fns){0};
  for (int i = 0; i < g_npm2; i++)
    if ((uint64_t)addr - g_pm2[i].base < g_pm2[i].size)
      f = g_pm2[i];
  spin_unlock(&g_pm2_lock);
  return f;
}

/* A map's flush (persist's too, without its sfence). */
static void pm2_flush_effect(int gran, const void *p, size_t n) {
  if (gran == PM2_PAGE)
    msync_lines(p, n, 1);
  else if (gran == PM2_CACHE_LINE)
    flush_lines(pmdk_cfg().flush, p, n);
}
static void pm2_persist(const void *p, size_t n) {
  PMEM_WRAP_BEGIN
  struct pm2_fns f = pm2_at(p);
  f.persist(p, n);
  if (outer) {
    pm2_flush_effect(f.gran, p, n);
    fence_ev(K_SFENCE);
  }
  PMEM_WRAP_END
}
static void pm2_flush(const void *p, size_t n) {
  PMEM_WRAP_BEGIN
  struct pm2_fns f = pm2_at(p);
  f.flush(p, n);
  if (outer)
    pm2_flush_effect(f.gran, p, n);
  PMEM_WRAP_END
}
static void pm2_drain(void) {
  PMEM_WRAP_BEGIN
  pm2_at(NULL).drain();
  if (outer)
    fence_ev(K_SFENCE);
  PMEM_WRAP_END
}
/* A map's copy or set: see above. */
static void pm2_effect(int gran, void *d, const void *s, size_t n, unsigned flags) {
  struct pmdk_cfg c = pmdk_cfg();
  copy_effect(d, s, n, flags, gran == PM2_BYTE, c.flush);
  if (gran == PM2_PAGE && !(flags & PMEM_F_MEM_NOFLUSH_) && n && s != d)
    msync_lines(d, n, 0);
  if (!(flags & (PMEM_F_MEM_NODRAIN_ | PMEM_F_MEM_NOFLUSH_)))
    fence_ev(K_SFENCE);
}
static void *pm2_memcpy(void *d, const void *s, size_t n, unsigned flags) {
  PMEM_WRAP_BEGIN
  struct pm2_fns f = pm2_at(d);
  void *r = f.memcpy_(d, s, n, flags);
  if (outer)
    pm2_effect(f.gran, d, s, n, flags);
  PMEM_WRAP_END
  return r;
}
static void *pm2_memmove(void *d, const void *s, size_t n, unsigned flags) {
  PMEM_WRAP_BEGIN
  struct pm2_fns f = pm2_at(d);
  void *r = f.memmove_(d, s, n, flags);
  if (outer)
    pm2_effect(f.gran, d, s, n, flags);
  PMEM_WRAP_END
  return r;
}
static void *pm2_memset(void *d, int c, size_t n, unsigned flags) {
  PMEM_WRAP_BEGIN
  struct pm2_fns f = pm2_at(d);
  void *r = f.memset_(d, c, n, flags);
  if (outer)
    pm2_effect(f.gran, d, NULL, n, flags);
  PMEM_WRAP_END
  return r;
}

PMDK_WRAPPER pm2_persist_t pmem2_get_persist_fn(struct pmem2_map *map) {
  return pm2_of_map(map)->persist ? pm2_persist : NULL;
}
PMDK_WRAPPER pm2_persist_t pmem2_get_flush_fn(struct pmem2_map *map) {
  return pm2_of_map(map)->flush ? pm2_flush : NULL;
}
PMDK_WRAPPER pm2_drain_t pmem2_get_drain_fn(struct pmem2_map *map) {
  return pm2_of_map(map)->drain ? pm2_drain : NULL;
}
PMDK_WRAPPER pm2_copy_t pmem2_get_memcpy_fn(struct pmem2_map *map) {
  return pm2_of_map(map)->memcpy_ ? pm2_memcpy : NULL;
}
PMDK_WRAPPER pm2_copy_t pmem2_get_memmove_fn(struct pmem2_map *map) {
  return pm2_of_map(map)->memmove_ ? pm2_memmove : NULL;
}
PMDK_WRAPPER pm2_set_t pmem2_get_memset_fn(struct pmem2_map *map) {
  return pm2_of_map(map)->memset_ ? pm2_memset : NULL;
}

/* ---------- vector and masked accesses (PmTracePass.cpp) ---------- */

/* A masked load/store of `nlanes` (<= 64) elements of `esize` bytes at `base`: only the lanes
 * whose bit is set in `maskbits`, each run of adjacent active lanes as one access (a store's
 * value read back from memory). `kind` is K_LOAD, K_STORE or K_NTSTORE (maskmovdqu). */
void __pmt_masked(uint32_t kind, const void *base, uint64_t esize, uint64_t nlanes, uint64_t maskbits) {
  if (!g_on)
    return;
  if (nlanes < 64)
    maskbits &= (1ULL << nlanes) - 1;
  while (maskbits) {
    unsigned lo = (unsigned)__builtin_ctzll(maskbits);
    uint64_t rest = maskbits >> lo;
    unsigned run = ~rest ? (unsigned)__builtin_ctzll(~rest) : 64 - lo;
    mem_access(kind, (const char *)base + lo * esize, run * esize, kind != K_LOAD);
    maskbits = lo + run >= 64 ? 0 : maskbits & ~(((1ULL << run) - 1) << lo);
  }
}

/* A scatter/gather of `nlanes` (<= 64) lanes: lane i (bit i of `maskbits` set) accesses `esize`
 * bytes at addrs[i], lowest lane first (the order x86 writes overlapping lanes in); a scatter
 * lane's value is read back from memory. */
void __pmt_lanes(uint32_t kind, const uint64_t *addrs, uint64_t esize, uint64_t nlanes, uint64_t maskbits) {
  if (!g_on)
    return;
  for (uint64_t i = 0; i < nlanes && i < 64; i++)
    if (maskbits >> i & 1)
      mem_access(kind, (const void *)addrs[i], esize, kind != K_LOAD);
}

/* ---------- sync events with a value the pass supplies (PmTracePass.cpp) ----------
 * Appended for the pass's C11/C++ atomics and libatomic calls; nothing above uses it. */

/* A sync event of `n` bytes at `p`: K_ACQUIRE (an acquire load, recorded after it; `value`
 * NULL), K_RELEASE (a release store, recorded before it) or K_RMW, whose bytes written are
 * `value`'s, not read back from `p` (a release has not stored yet, and after an rmw another
 * thread may have written `p` again). As for every sync event, the part in `p`'s first line is
 * the sync event; the rest of a wider access is a `store` (an acquire's a `load`). */
void __pmt_sync(uint32_t kind, const void *p, uint64_t n, const void *value) {
  if (!g_on || !n)
    return;
  if (n > 0xffffffffULL)
    n = 0xffffffffULL;
  if (t_busy) {
    defer_from(P_SYNC, kind, p, n, value != NULL, NULL, (const uint8_t *)value);
    return;
  }
  struct tbuf *b = enter();
  if (!b)
    return;
  emit_sync(b, kind, p, (unsigned)n, value);
  if (kind == K_ACQUIRE) {
    int pm;
    uint64_t room = LINE - (translate((uint64_t)p, &pm) & (LINE - 1));
    if (n > room)
      emit_mem(b, K_LOAD, (uint64_t)p + room, n - room, NULL);
  }
  leave(b);
}
