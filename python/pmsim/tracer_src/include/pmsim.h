/* pmsim annotations for programs traced with `pmsim trace cc` / `pmsim trace c++`.
 *
 * Why: a traced program's trace has no operations unless it says where they are, so pmsim
 * cannot report its throughput or operation latency; and a program can only order persists
 * with x86 flushes and fences unless it can state the design-neutral barriers pmsim's designs
 * implement natively (docs/design.md §3: HOPS and ASAP use ofence/dfence, the baseline maps
 * them to clwb + sfence).
 *
 *   pmsim_begin("insert"); ... pmsim_end("insert");   operation markers: `begin`/`end` events;
 *                                                     throughput and latency count between them
 *   pmsim_ofence();   persist barrier: later persists may not survive a crash unless earlier
 *                     ones do (`ofence`)
 *   pmsim_dfence();   durability fence: the thread's earlier persists are durable after it
 *                     (`dfence`)
 *   pmsim_strand();   starts a new persist strand (strand persistency, `strand`)
 *
 * The annotations only add events to the trace: they do not flush or fence the real machine,
 * so a program that must also run correctly on real PM keeps its own clwb/sfence. Labels are 1
 * to 256 printable ASCII characters without spaces or '#'; a pmsim_end without a pmsim_begin of
 * its label earlier on the same thread stops the traced program with a clear message.
 *
 * `pmsim trace cc` defines PMSIM_TRACE and puts this header on the include path. Built any
 * other way (plain gcc: copy this header beside the program), every annotation is an empty
 * inline function, so an annotated program needs no other change to build untraced.
 */
#ifndef PMSIM_H
#define PMSIM_H

#ifdef __cplusplus
extern "C" {
#endif

#ifdef PMSIM_TRACE
void pmsim_begin(const char *label);
void pmsim_end(const char *label);
void pmsim_ofence(void);
void pmsim_dfence(void);
void pmsim_strand(void);
#else
static inline void pmsim_begin(const char *label) { (void)label; }
static inline void pmsim_end(const char *label) { (void)label; }
static inline void pmsim_ofence(void) {}
static inline void pmsim_dfence(void) {}
static inline void pmsim_strand(void) {}
#endif

#ifdef __cplusplus
}
#endif

#endif /* PMSIM_H */
