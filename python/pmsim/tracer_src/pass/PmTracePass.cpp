// pmsim tracer: the LLVM pass plugin.
//
// Why it exists: neither sanitizer runtimes, Valgrind nor QEMU see what a persistent-memory
// program does (inline-asm flushes, CLWB/CLFLUSHOPT, store values). This pass instruments the
// optimised IR (it runs at the end of the optimisation pipeline, like TSan, so it traces the
// accesses the program really performs) with calls into the runtime (`pmtrace_rt.c`):
//   loads and stores (the runtime reads the stored value back); atomics as x86 performs them:
//   atomicrmw, cmpxchg and seq_cst stores (xchg) -> rmw, with the value written computed here
//   (a failed cmpxchg: the value the location keeps), acquire / seq_cst loads -> acquire,
//   release stores -> release with the value stored (relaxed ones are plain loads and stores);
//   seq_cst fences (-> mfence); llvm.memcpy/memmove/memset and the libc calls that do the same
//   (memcpy, memmove, mempcpy, memset, bzero, explicit_bzero, their _FORTIFY_SOURCE `__*_chk`
//   forms and the wide wmem*); libc string and I/O calls that write or read memory the program
//   passes them (strcpy, stpcpy, strncpy, strcat, memccpy, strdup, sprintf, snprintf, read,
//   fread, fgets, their `__*_chk` forms and wide forms; write, fwrite, fputs): a call to the
//   runtime after them, which computes from the call's result what they wrote and read;
//   libatomic calls (`__atomic_load/store/exchange/
//   compare_exchange` and the sized `__atomic_*_N`) as the atomics they stand for; the x86
//   flush and fence intrinsics; masked, compressing/expanding and scatter/gather vector
//   accesses (llvm.masked.*, the x86 maskload/maskstore, maskmovdqu and gather/scatter
//   intrinsics: only the active lanes' bytes); and inline asm recognised by its text (clflush,
//   clflushopt, clwb, sfence, mfence, the old spellings `.byte 0x66; clflush` = CLFLUSHOPT and
//   `.byte 0x66; xsaveopt` = CLWB, raw `.byte` encodings of those, and lock-prefixed
//   instructions and xchg with memory = mfence).
//   A flush in asm flushes the address its operand computes: a memory operand's address, or
//   disp(base,index,scale) / [base+index*scale+disp] over operands and registers bound to
//   operands by their constraints, evaluated at run time. A flush whose address the asm does not
//   tell, and asm that writes memory in a way not modelled here (rep movs/stos, movnt*, a plain
//   store to a memory operand), are not traced: the pass says so on stderr, once per asm site.
// What it guarantees: every instrumented access becomes exactly one runtime call, issued in the
// thread's program order after the access (before it for loads); the exceptions are a release
// or seq_cst store (recorded before it: its release must precede any acquire that reads it),
// an acquire load (after it: it follows the release it read), a masked or scatter/gather
// access of more than 64 lanes (one call per 64 lanes, in lane order), a generic libatomic call
// (also the loads / stores of its buffers) and an asm statement, which gets one call per
// recognised instruction in it, in the asm's order. Accesses whose address is a stack slot of
// the current function (an alloca that never escapes the IR we see) are left out: they are
// never persistent memory.
// The work between accesses is counted too, so a traced program is timed with its computation
// and not as if only its memory accesses took time: each basic block adds its number of
// non-memory instructions to a thread-local counter (`__pmt_icount`), which the runtime turns
// into a `compute N` event before the thread's next event. Optimised IR instructions stand in
// for machine instructions (x86 folds some into addressing modes and splits others); PHIs,
// debug and lifetime markers and no-op casts count nothing, and the traced accesses count
// nothing here because the simulator times them itself.

#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace llvm;

namespace {

// Kind codes shared with the runtime and the binary trace format (docs/binary-trace.md).
enum : unsigned {
  K_LOAD = 1, K_STORE = 2, K_NTSTORE = 3, K_RMW = 4, K_CLWB = 5, K_CLFLUSHOPT = 6, K_CLFLUSH = 7, K_SFENCE = 8,
  K_MFENCE = 9, K_ACQUIRE = 12, K_RELEASE = 13
};

struct Hooks {
  FunctionCallee load, store, ntstore, rmw, sync, memop, strop, flush, fence, masked, lanes;
};

Hooks getHooks(Module &M) {
  LLVMContext &C = M.getContext();
  Type *V = Type::getVoidTy(C);
  Type *P = Type::getInt8PtrTy(C);
  Type *I64 = Type::getInt64Ty(C);
  Type *I32 = Type::getInt32Ty(C);
  Hooks h;
  h.load = M.getOrInsertFunction("__pmt_load", V, P, I64);
  h.store = M.getOrInsertFunction("__pmt_store", V, P, I64);
  h.ntstore = M.getOrInsertFunction("__pmt_ntstore", V, P, I64);
  h.rmw = M.getOrInsertFunction("__pmt_rmw", V, P, I64);
  // (kind: acquire / release / rmw, address, size, the bytes written or null): a sync event
  // whose value the pass supplies (pmtrace_rt.c, the block for PmTracePass at its end)
  h.sync = M.getOrInsertFunction("__pmt_sync", V, I32, P, I64, P);
  h.memop = M.getOrInsertFunction("__pmt_memop", V, P, P, I64);
  // (kind, character size, destination, source, count, result): a libc string or I/O call
  h.strop = M.getOrInsertFunction("__pmt_strop", V, I32, I32, P, P, I64, I64);
  h.flush = M.getOrInsertFunction("__pmt_flush", V, I32, P);
  h.fence = M.getOrInsertFunction("__pmt_fence", V, I32);
  // (kind, base, element size, lanes <= 64, mask bits): the active lanes of a contiguous access
  h.masked = M.getOrInsertFunction("__pmt_masked", V, I32, P, I64, I64, I64);
  // (kind, lane addresses, element size, lanes <= 64, mask bits): scatter / gather
  h.lanes = M.getOrInsertFunction("__pmt_lanes", V, I32, P, I64, I64, I64);
  return h;
}

bool isStackSlot(Value *Ptr) {
  const Value *Obj = getUnderlyingObject(Ptr);
  if (const auto *A = dyn_cast<AllocaInst>(Obj))
    return A->isStaticAlloca();
  return false;
}

std::string lower(StringRef s) {
  std::string out = s.str();
  for (char &c : out)
    c = (char)tolower((unsigned char)c);
  return out;
}

// One operand of an inline-asm statement, as its text numbers them ($0, $1, ...: the outputs,
// then the inputs, clobbers not counted): the value it has when the asm starts (the call
// argument; for an output tied to an input, `"+r"`, the input's argument; null for an output
// that is only a return value), whether it is a memory operand (`=*m`, `*m`: the argument is
// the operand's address) and the register its constraint names (`"a"` -> "ax", `"D"` -> "di",
// a register variable -> "r9"; empty for a register the compiler picks).
struct AsmOperand {
  Value *arg = nullptr;
  bool memory = false;
  std::string reg;
};

struct AsmStmt {
  std::vector<AsmOperand> operands;
  bool clobbersMemory = false; // "memory" clobber or a memory output
};

// A register's family name, as LLVM's constraints spell it: rax / eax / ax / al -> "ax",
// r9 / r9d -> "r9" (a leading `%` and braces are dropped). Other names are returned as they are.
std::string regFamily(std::string r) {
  if (!r.empty() && r.front() == '{' && r.back() == '}')
    r = r.substr(1, r.size() - 2);
  if (!r.empty() && r.front() == '%')
    r = r.substr(1);
  if (r.size() >= 2 && r[0] == 'r' && isdigit((unsigned char)r[1])) {
    size_t e = 1;
    while (e < r.size() && isdigit((unsigned char)r[e]))
      e++;
    return r.substr(0, e);
  }
  static const char *const fam[][5] = {{"ax", "rax", "eax", "al", "ah"}, {"bx", "rbx", "ebx", "bl", "bh"},
                                       {"cx", "rcx", "ecx", "cl", "ch"}, {"dx", "rdx", "edx", "dl", "dh"},
                                       {"si", "rsi", "esi", "sil", "si"}, {"di", "rdi", "edi", "dil", "di"},
                                       {"bp", "rbp", "ebp", "bpl", "bp"}, {"sp", "rsp", "esp", "spl", "sp"}};
  for (const auto &f : fam)
    for (const char *n : f)
      if (r == n)
        return f[0];
  return r;
}

AsmStmt asmStmt(CallInst *CI, InlineAsm *IA) {
  AsmStmt st;
  unsigned arg = 0;
  for (const InlineAsm::ConstraintInfo &C : IA->ParseConstraints()) {
    if (C.Type == InlineAsm::isClobber) {
      for (const std::string &code : C.Codes)
        if (code == "{memory}")
          st.clobbersMemory = true;
      continue;
    }
    AsmOperand op;
    if (C.hasArg()) {
      op.arg = arg < CI->arg_size() ? CI->getArgOperand(arg) : nullptr;
      op.memory = C.isIndirect;
      arg++;
    }
    if (C.Codes.size() == 1 && C.Codes[0].size() > 2 && C.Codes[0].front() == '{')
      op.reg = regFamily(C.Codes[0]);
    if (C.Type == InlineAsm::isOutput && C.isIndirect)
      st.clobbersMemory = true;
    // An input tied to an output (`"+r"(p)`: `=r` and `0`): the output starts with its value and
    // shares its register.
    if (C.Type == InlineAsm::isInput && C.Codes.size() == 1 && !C.Codes[0].empty() &&
        C.Codes[0].find_first_not_of("0123456789") == std::string::npos &&
        (size_t)atoi(C.Codes[0].c_str()) < st.operands.size()) {
      AsmOperand &out = st.operands[atoi(C.Codes[0].c_str())];
      if (!out.arg && !out.memory)
        out.arg = op.arg;
      op.reg = out.reg;
    }
    st.operands.push_back(op);
  }
  return st;
}

// The operand that holds register `name` (any width: "%rax", "eax", "r9") when the asm
// starts, or -1.
int regOperand(const AsmStmt &st, const std::string &name) {
  std::string f = regFamily(name);
  for (size_t i = 0; i < st.operands.size(); i++)
    if (st.operands[i].arg && !st.operands[i].memory && st.operands[i].reg == f)
      return (int)i;
  return -1;
}

// The address a flush in asm names, as asm operands: base + index * scale + disp, or, for a
// memory operand (`clwb %0` with `"+m"`), that operand's address + disp. `ok` is false when
// the address cannot be told from the asm's operands (a register nothing binds, %rip, a
// symbol).
struct AsmAddr {
  bool ok = false;
  int base = -1, index = -1;
  uint64_t scale = 1;
  int64_t disp = 0;
};

// A recognised flush or fence of an asm text: its kind and, for a flush, its address.
struct AsmOp {
  unsigned kind;
  AsmAddr addr;
};

struct AsmText {
  std::vector<AsmOp> ops; // in the text's order
  std::string untraced;   // the first instruction the trace does not see, and why
  std::string why;
};

// The operand reference `$N` / `${N}` / `${N:mod}` that `s` is exactly (blanks around it
// allowed): N, and the modifier in `mod`; else -1.
int exactOperandRef(std::string s, std::string *mod = nullptr) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  if (b == std::string::npos)
    return -1;
  s = s.substr(b, e - b + 1);
  if (s.size() < 2 || s[0] != '$')
    return -1;
  bool braced = s[1] == '{';
  size_t i = braced ? 2 : 1, j = i;
  while (j < s.size() && isdigit((unsigned char)s[j]))
    j++;
  if (j == i)
    return -1;
  std::string m;
  if (braced) {
    if (j < s.size() && s[j] == ':') {
      size_t k = s.find('}', j);
      if (k == std::string::npos)
        return -1;
      m = s.substr(j + 1, k - j - 1);
      j = k;
    }
    if (j >= s.size() || s[j] != '}')
      return -1;
    j++;
  }
  if (j != s.size())
    return -1;
  if (mod)
    *mod = m;
  return atoi(s.c_str() + i);
}

// A constant term of an address: a number (decimal, 0x hex, gas's leading-0 octal) or an
// immediate operand (`${1:c}` with `"i"(64)`); false if `s` is neither.
bool constTerm(const std::string &s, const AsmStmt &st, int64_t &v) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  if (b == std::string::npos)
    return false;
  std::string t = s.substr(b, e - b + 1);
  if (isdigit((unsigned char)t[0])) {
    char *end = nullptr;
    v = (int64_t)strtoull(t.c_str(), &end, 0);
    return *end == 0;
  }
  int n = exactOperandRef(t);
  if (n >= 0 && (size_t)n < st.operands.size())
    if (auto *CI = dyn_cast_or_null<ConstantInt>(st.operands[n].arg)) {
      v = CI->getSExtValue();
      return true;
    }
  return false;
}

// A sum of constant terms (`64`, `-0x40`, `8+${1:c}`); false if any term is not one.
bool constSum(const std::string &s, const AsmStmt &st, int64_t &v) {
  v = 0;
  int sign = 1;
  std::string cur;
  auto take = [&]() {
    if (cur.find_first_not_of(" \t") == std::string::npos)
      return true;
    int64_t t;
    if (!constTerm(cur, st, t))
      return false;
    v += sign * t;
    return true;
  };
  for (char c : s) {
    if (c == '+' || c == '-') {
      if (!take())
        return false;
      cur.clear();
      sign = c == '-' ? -1 : 1;
    } else {
      cur += c;
    }
  }
  return take();
}

// The operand a register term names: an operand reference (`$0`, `${0:q}`) or a register
// bound to an operand by its constraint (`%rax` with `"a"(p)`); -1 if it is neither. A constant
// operand is one only where nothing but a register can stand (`constInReg`: AT&T's
// `(base,index)`), where the compiler put `"r"(15L)` in a register; elsewhere it is an
// immediate, which `constTerm` reads.
int regTerm(const std::string &s, const AsmStmt &st, bool constInReg = false) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  if (b == std::string::npos)
    return -1;
  std::string t = s.substr(b, e - b + 1);
  std::string mod;
  int n = exactOperandRef(t, &mod);
  if (n >= 0)
    return (size_t)n < st.operands.size() && st.operands[n].arg && !st.operands[n].memory &&
                   (constInReg || !isa<ConstantInt>(st.operands[n].arg))
               ? n
               : -1;
  if (t[0] == '%')
    t = t.substr(1);
  for (char c : t)
    if (!isalnum((unsigned char)c))
      return -1;
  return regOperand(st, t);
}

// The address of a flush's operand text `o` (lower case). AT&T: `disp(base,index,scale)`,
// `(base)`, `%0` / `%a0`; Intel: `[base+index*scale+disp]` after an optional `byte ptr`, or
// `%0`. Registers are operand references or registers bound to operands.
AsmAddr parseAsmAddr(std::string o, const AsmStmt &st, bool intel) {
  AsmAddr a;
  size_t b = o.find_first_not_of(" \t"), e = o.find_last_not_of(" \t");
  if (b == std::string::npos)
    return a;
  o = o.substr(b, e - b + 1);
  // A memory operand (or an address operand, `%a0`) as the whole operand: its address.
  std::string mod;
  int whole = exactOperandRef(o, &mod);
  if (intel) {
    // `byte ptr [...]`, `zmmword ptr[...]`
    size_t ptr = o.find("ptr");
    if (ptr != std::string::npos && ptr && o[ptr - 1] == ' ' && ptr + 3 < o.size() &&
        (o[ptr + 3] == ' ' || o[ptr + 3] == '[' || o[ptr + 3] == '$'))
      o = o.substr(o.find_first_not_of(" \t", ptr + 3));
    whole = exactOperandRef(o, &mod);
  }
  if (whole >= 0) {
    if ((size_t)whole >= st.operands.size() || !st.operands[whole].arg)
      return a;
    if (!st.operands[whole].memory && mod != "a") {
      // A register as a flush's operand is not valid asm; read it as the address (what a
      // pointer operand that gcc would print as an address, `"p"`, means).
      Type *T = st.operands[whole].arg->getType();
      if (!T->isPointerTy() && !T->isIntegerTy(64))
        return a;
    }
    a.base = whole;
    a.ok = true;
    return a;
  }
  if (intel) {
    size_t lb = o.find('['), rb = o.rfind(']');
    if (lb == std::string::npos || rb == std::string::npos || rb < lb ||
        o.find_first_not_of(" \t", rb + 1) != std::string::npos)
      return a;
    int64_t d = 0;
    if (lb && !constSum(o.substr(0, lb), st, d))
      return a; // `sym[rax]`, `fs:[rax]`
    a.disp = d;
    // Terms separated by + and -; a register term may carry `*scale` (either side).
    std::string in = o.substr(lb + 1, rb - lb - 1), cur;
    int sign = 1;
    auto term = [&]() {
      if (cur.find_first_not_of(" \t") == std::string::npos)
        return true;
      size_t star = cur.find('*');
      if (star != std::string::npos) {
        std::string l = cur.substr(0, star), r = cur.substr(star + 1);
        int64_t s;
        int reg;
        int64_t k;
        if ((reg = regTerm(l, st)) >= 0 && constTerm(r, st, s)) {
        } else if ((reg = regTerm(r, st)) >= 0 && constTerm(l, st, s)) {
        } else if (constTerm(l, st, k) && constTerm(r, st, s)) {
          // `%1*8` with `"r"(15L)` or `"i"(15)`: either way a constant displacement.
          a.disp += sign * k * s;
          return true;
        } else {
          return false;
        }
        if (sign < 0 || a.index >= 0)
          return false;
        a.index = reg;
        a.scale = (uint64_t)s;
        return true;
      }
      int reg = regTerm(cur, st);
      if (reg >= 0) {
        if (sign < 0)
          return false;
        if (a.base < 0)
          a.base = reg;
        else if (a.index < 0)
          a.index = reg;
        else
          return false;
        return true;
      }
      int64_t v;
      if (!constTerm(cur, st, v))
        return false;
      a.disp += sign * v;
      return true;
    };
    for (char c : in) {
      if (c == '+' || c == '-') {
        if (!term())
          return a;
        cur.clear();
        sign = c == '-' ? -1 : 1;
      } else {
        cur += c;
      }
    }
    if (!term())
      return a;
    a.ok = a.base >= 0 || a.index >= 0;
    return a;
  }
  // AT&T: disp(base, index, scale)
  size_t lp = o.find('('), rp = o.rfind(')');
  if (lp == std::string::npos || rp == std::string::npos || rp < lp ||
      o.find_first_not_of(" \t", rp + 1) != std::string::npos)
    return a;
  int64_t d = 0;
  if (lp && !constSum(o.substr(0, lp), st, d))
    return a; // `sym(%rip)`, `%fs:(%rax)`
  a.disp = d;
  std::vector<std::string> parts;
  std::string in = o.substr(lp + 1, rp - lp - 1), cur;
  for (char c : in) {
    if (c == ',') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  if (parts.size() > 3)
    return a;
  auto blank = [](const std::string &s) { return s.find_first_not_of(" \t") == std::string::npos; };
  if (!blank(parts[0]) && (a.base = regTerm(parts[0], st, true)) < 0)
    return a;
  if (parts.size() >= 2 && !blank(parts[1]) && (a.index = regTerm(parts[1], st, true)) < 0)
    return a;
  if (parts.size() == 3 && !blank(parts[2])) {
    int64_t s;
    if (!constTerm(parts[2], st, s))
      return a;
    a.scale = (uint64_t)s;
  }
  a.ok = a.base >= 0 || a.index >= 0;
  return a;
}

// The first operand reference `$N` / `${N}` / `${N:mod}` in `s` (`$$` is a literal `$`), or -1.
int operandRef(const std::string &s) {
  for (size_t i = 0; i + 1 < s.size(); i++) {
    if (s[i] != '$')
      continue;
    if (s[i + 1] == '$') {
      i++;
      continue;
    }
    size_t j = i + 1 + (s[i + 1] == '{');
    if (j < s.size() && isdigit((unsigned char)s[j]))
      return atoi(s.c_str() + j);
  }
  return -1;
}

// Operands of one instruction, split at the commas outside parentheses and brackets.
std::vector<std::string> splitOperands(const std::string &s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(' || c == '[' || c == '{')
      depth++;
    else if (c == ')' || c == ']' || c == '}')
      depth--;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  size_t b = cur.find_first_not_of(" \t");
  if (b != std::string::npos)
    out.push_back(cur);
  return out;
}

const char *const WRITES_UNSEEN = "writes memory the tracer does not see";
const char *const FLUSH_UNRESOLVED = "flushes an address the tracer cannot tell from the asm's operands";
const char *const BYTES_UNKNOWN = "is a .byte encoding the tracer does not decode (it may write memory)";

// Raw instruction bytes (`.byte 0x66, 0x0f, 0xae, 0x30`, as the Linux kernel writes CLWB for old
// assemblers): the flushes and fences they encode, appended to `ops`, with a flush's address
// from its ModRM (a register bound to an operand, plus disp8/disp32). Returns false if they
// hold anything else (or a flush whose address cannot be told: `*unresolved` is set); legacy
// prefixes left over at the end (`.byte 0x66; clflush %0`) are returned in `*prefix66` /
// `*lock` for the next instruction.
bool decodeBytes(const std::vector<unsigned> &bytes, const AsmStmt &st, std::vector<AsmOp> &ops, bool *prefix66,
                 bool *lock, bool *unresolved, bool *writes) {
  static const char *const regs[16] = {"ax", "cx", "dx", "bx", "sp", "bp", "si", "di",
                                       "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"};
  size_t i = 0, n = bytes.size();
  while (i < n) {
    bool p66 = false, locked = false;
    unsigned rex = 0;
    for (; i < n; i++) {
      unsigned c = bytes[i];
      if (c == 0x66)
        p66 = true;
      else if (c == 0xf0)
        locked = true;
      else if (c == 0x2e || c == 0x3e || c == 0x26 || c == 0x36)
        continue; // segment / branch-hint prefixes (the kernel's `.byte 0x3e; clflush`)
      else if (c >= 0x40 && c <= 0x4f && i + 1 < n && bytes[i + 1] == 0x0f)
        rex = c;
      else
        break;
    }
    if (i == n) {
      *prefix66 = p66;
      *lock = locked;
      return true;
    }
    if (i + 2 >= n || bytes[i] != 0x0f || bytes[i + 1] != 0xae)
      return false;
    unsigned modrm = bytes[i + 2], mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
    i += 3;
    if (mod == 3) {
      if (p66 || rex)
        return false; // pcommit, tpause, ...: not modelled
      if (reg == 7)
        ops.push_back({K_SFENCE, {}});
      else if (reg == 6)
        ops.push_back({K_MFENCE, {}});
      else if (reg != 5) // lfence orders no store
        return false;
      continue;
    }
    unsigned kind = reg == 7 ? (p66 ? K_CLFLUSHOPT : K_CLFLUSH) : reg == 6 && p66 ? K_CLWB : 0;
    unsigned dispBytes = mod == 1 ? 1 : mod == 2 ? 4 : 0;
    if (i + dispBytes > n)
      return false;
    if (!kind) {
      if (p66)
        return false;
      if (reg == 1 || reg == 2 || reg == 5) { // fxrstor, ldmxcsr, xrstor: read memory only
        i += dispBytes + (rm == 4 ? 1 : 0) + (mod == 0 && rm == 5 ? 4 : 0);
        if (i > n)
          return false;
        continue;
      }
      *writes = true; // fxsave, stmxcsr, xsave, xsaveopt
      return false;
    }
    AsmAddr a;
    if (rm == 4 || (mod == 0 && rm == 5)) {
      *unresolved = true; // SIB byte or %rip-relative
      return false;
    }
    int64_t d = 0;
    for (unsigned k = 0; k < dispBytes; k++)
      d |= (int64_t)bytes[i + k] << (8 * k);
    if (dispBytes == 1)
      d = (int8_t)d;
    else if (dispBytes == 4)
      d = (int32_t)d;
    i += dispBytes;
    a.base = regOperand(st, regs[rm + ((rex & 1) ? 8 : 0)]);
    a.disp = d;
    a.ok = a.base >= 0;
    if (!a.ok) {
      *unresolved = true;
      return false;
    }
    ops.push_back({kind, a});
  }
  return true;
}

// The persist-relevant instructions of one inline-asm text, in order, and the first one the
// trace does not see.
AsmText asmText(StringRef text, const AsmStmt &st, bool intel) {
  std::string t = lower(text);
  AsmText out;
  auto untraced = [&](const std::string &ins, const char *why) {
    if (out.untraced.empty()) {
      out.untraced = ins;
      out.why = why;
    }
  };
  // Split into instructions at ';' and newlines; a `.byte 0x66` (or `data16`) prefix and a
  // `lock` prefix written as an instruction of its own apply to the next one.
  bool prefix66 = false, pendingLock = false;
  // `.byte` values not yet decoded (an encoding may span several `.byte` lines).
  std::vector<unsigned> bytes;
  std::string bytesText;
  auto decodePending = [&]() {
    if (bytes.empty())
      return;
    bool p66 = false, lk = false, unresolved = false, writes = false;
    std::vector<AsmOp> ops;
    if (decodeBytes(bytes, st, ops, &p66, &lk, &unresolved, &writes)) {
      out.ops.insert(out.ops.end(), ops.begin(), ops.end());
      prefix66 = p66;
      pendingLock = lk;
    } else {
      out.ops.insert(out.ops.end(), ops.begin(), ops.end());
      if (unresolved)
        untraced(bytesText, FLUSH_UNRESOLVED);
      else if (writes)
        untraced(bytesText, WRITES_UNSEEN);
      else if (st.clobbersMemory)
        untraced(bytesText, BYTES_UNKNOWN);
    }
    bytes.clear();
    bytesText.clear();
  };
  auto refIsStack = [&](int n) {
    return n >= 0 && (size_t)n < st.operands.size() && st.operands[n].arg &&
           st.operands[n].arg->getType()->isPointerTy() && isStackSlot(st.operands[n].arg);
  };
  auto refIsMemory = [&](int n) { return n >= 0 && (size_t)n < st.operands.size() && st.operands[n].memory; };
  // A memory operand: an address in parentheses (AT&T) or brackets (Intel), or a memory operand.
  auto isMem = [&](const std::string &o) {
    return o.find('(') != std::string::npos || o.find('[') != std::string::npos || refIsMemory(operandRef(o));
  };
  // A memory operand of the program's (not the stack pointer's, not a stack slot's).
  auto isProgramMem = [&](const std::string &o) {
    if (!isMem(o))
      return false;
    if (o.find("rsp") != std::string::npos || o.find("esp") != std::string::npos)
      return false;
    return !refIsStack(operandRef(o));
  };
  size_t i = 0;
  while (i <= t.size()) {
    size_t j = t.find_first_of(";\n", i);
    if (j == std::string::npos)
      j = t.size();
    std::string ins = t.substr(i, j - i);
    i = j + 1;
    size_t hash = ins.find('#');
    if (hash != std::string::npos)
      ins = ins.substr(0, hash);
    size_t b = ins.find_first_not_of(" \t");
    ins = b == std::string::npos ? "" : ins.substr(b);
    // A label `1:` / `name:` before the instruction.
    size_t colon = ins.find(':');
    if (colon != std::string::npos && ins.find_first_of(" \t$(%[") > colon) {
      ins = ins.substr(colon + 1);
      b = ins.find_first_not_of(" \t");
      ins = b == std::string::npos ? "" : ins.substr(b);
    }
    if (ins.empty())
      continue;
    auto starts = [&](const std::string &s, const char *w) { return s.rfind(w, 0) == 0; };
    if (starts(ins, ".byte")) {
      bool numeric = true;
      std::vector<unsigned> vals;
      for (const std::string &v : splitOperands(ins.substr(5))) {
        int64_t x;
        if (!constTerm(v, st, x) || x < -128 || x > 255) {
          numeric = false;
          break;
        }
        vals.push_back((unsigned)(x & 0xff));
      }
      if (!numeric) {
        decodePending();
        if (st.clobbersMemory)
          untraced(ins, BYTES_UNKNOWN);
        continue;
      }
      bytes.insert(bytes.end(), vals.begin(), vals.end());
      bytesText += (bytesText.empty() ? "" : "; ") + ins;
      continue;
    }
    decodePending();
    if (starts(ins, ".")) {
      if (starts(ins, ".intel_syntax"))
        intel = true;
      else if (starts(ins, ".att_syntax"))
        intel = false;
      continue; // other directives
    }
    // Prefixes.
    bool locked = pendingLock, rep = false;
    pendingLock = false;
    for (;;) {
      size_t e = ins.find_first_of(" \t");
      std::string w = ins.substr(0, e);
      if (w == "lock")
        locked = true;
      else if (w == "rep" || w == "repe" || w == "repz" || w == "repne" || w == "repnz")
        rep = true;
      else if (w == "data16")
        prefix66 = true;
      else
        break;
      if (e == std::string::npos) {
        ins.clear();
        break;
      }
      ins = ins.substr(ins.find_first_not_of(" \t", e));
    }
    if (ins.empty()) {
      pendingLock = locked; // `lock; addl ...`
      continue;
    }
    size_t e = ins.find_first_of(" \t");
    std::string mn = ins.substr(0, e);
    std::vector<std::string> opnds = splitOperands(e == std::string::npos ? "" : ins.substr(e));
    const std::string first = opnds.empty() ? "" : opnds.front();
    const std::string dest = opnds.empty() ? "" : (intel ? opnds.front() : opnds.back());
    bool p66 = prefix66;
    prefix66 = false;
    unsigned flush = 0;
    if (starts(mn, "clflushopt"))
      flush = K_CLFLUSHOPT;
    else if (starts(mn, "clflush"))
      flush = p66 ? K_CLFLUSHOPT : K_CLFLUSH;
    else if (starts(mn, "clwb"))
      flush = K_CLWB;
    else if (starts(mn, "xsaveopt") && p66)
      flush = K_CLWB;
    if (flush) {
      AsmAddr a = parseAsmAddr(first, st, intel);
      if (a.ok)
        out.ops.push_back({flush, a});
      else
        untraced(ins, FLUSH_UNRESOLVED);
    } else if (starts(mn, "sfence"))
      out.ops.push_back({K_SFENCE, {}});
    else if (starts(mn, "mfence"))
      out.ops.push_back({K_MFENCE, {}});
    else if (locked || (starts(mn, "xchg") && (isMem(first) || isMem(dest)))) {
      // A locked instruction (xchg with memory is one) is a full fence on x86. Its own write is
      // not traced: say so unless it writes the stack (`lock; addl $0,(%rsp)`).
      out.ops.push_back({K_MFENCE, {}});
      if (isProgramMem(dest) || isProgramMem(first))
        untraced(ins, WRITES_UNSEEN);
    } else if (out.untraced.empty()) {
      static const char *const implicitWriters[] = {"maskmov", "vmaskmov", "vpmaskmov", "movnt", "vmovnt",
                                                    "vpscatter", "vscatter", "xsave", "fxsave", "movdir",
                                                    "enqcmd", "cmpxchg8b", "cmpxchg16b"};
      static const char *const readOnly[] = {"cmp", "test", "prefetch", "nop", "push", "jmp", "call", "lea",
                                             "ptwrite", "vcmp", "vptest", "ucomi", "comi", "vucomi", "vcomi"};
      bool writes = false;
      if (rep)
        writes = !(starts(mn, "cmps") || starts(mn, "scas") || starts(mn, "lods") || starts(mn, "outs"));
      else if ((starts(mn, "movs") || starts(mn, "stos")) && opnds.empty())
        writes = true; // string instructions
      for (const char *w : implicitWriters)
        writes |= starts(mn, w);
      if (!writes && isProgramMem(dest)) {
        writes = mn != "bt" && mn != "btw" && mn != "btl" && mn != "btq";
        for (const char *w : readOnly)
          writes &= !starts(mn, w);
      }
      if (writes)
        untraced(ins, WRITES_UNSEEN);
    }
  }
  decodePending();
  return out;
}

// An asm operand's value as a 64-bit integer (a pointer's address), or null.
Value *asmInt(Value *A, IRBuilder<> &B) {
  if (A->getType()->isPointerTy())
    return B.CreatePtrToInt(A, B.getInt64Ty());
  if (A->getType()->isIntegerTy())
    return B.CreateZExtOrTrunc(A, B.getInt64Ty());
  return nullptr;
}

// The address a flush in asm names, computed from the operands' values; null if one of them
// is not an integer or pointer.
Value *asmAddress(const AsmStmt &st, const AsmAddr &a, IRBuilder<> &B) {
  Value *addr = B.getInt64((uint64_t)a.disp);
  if (a.base >= 0) {
    Value *v = asmInt(st.operands[a.base].arg, B);
    if (!v)
      return nullptr;
    addr = a.disp ? B.CreateAdd(v, addr) : v;
  }
  if (a.index >= 0) {
    Value *v = asmInt(st.operands[a.index].arg, B);
    if (!v)
      return nullptr;
    addr = B.CreateAdd(addr, B.CreateMul(v, B.getInt64(a.scale)));
  }
  return B.CreateIntToPtr(addr, B.getInt8PtrTy());
}

// The asm text as one quoted line for a message, spelled as in the C source: LLVM's `$1`,
// `${1:c}`, `$$` and `%rsp` are `%1`, `%c1`, `$` and `%%rsp` there.
std::string quoted(StringRef text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size(); i++) {
    char c = text[i];
    if (out.size() > 120) {
      out += "...";
      break;
    }
    if (c == '$' && i + 1 < text.size()) {
      char d = text[i + 1];
      if (d == '$') {
        out += '$';
        i++;
      } else if (d == '{') {
        size_t e = text.find('}', i);
        StringRef in = text.substr(i + 2, e == StringRef::npos ? StringRef::npos : e - i - 2);
        std::pair<StringRef, StringRef> nm = in.split(':');
        out += "%" + nm.second.str() + nm.first.str();
        i = e == StringRef::npos ? text.size() : e;
      } else {
        out += isdigit((unsigned char)d) ? '%' : '$';
      }
    } else if (c == '%') {
      out += "%%";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '"' || c == '\\') {
      out += std::string("\\") + c;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void warnUntraced(Function &F, CallInst *CI, StringRef text, const std::string &why) {
  std::string where = F.getName().str();
  if (DISubprogram *SP = F.getSubprogram())
    if (!SP->getName().empty())
      where = SP->getName().str();
  if (const DebugLoc &DL = CI->getDebugLoc())
    where += " (" + DL->getFilename().str() + ":" + std::to_string(DL.getLine()) + ":" +
             std::to_string(DL.getCol()) + ")";
  errs() << "pmsim trace cc: warning: inline asm not traced in " << where << ": " << quoted(text)
         << " " << why << "\n";
}

// Vector accesses with a lane mask: which form a call is.
enum VecForm {
  VF_NONE,
  VF_MASKED_STORE,  // llvm.masked.store(val, ptr, align, mask)
  VF_MASKED_LOAD,   // llvm.masked.load(ptr, align, mask, passthru)
  VF_SCATTER,       // llvm.masked.scatter(val, ptrs, align, mask)
  VF_GATHER,        // llvm.masked.gather(ptrs, align, mask, passthru)
  VF_COMPRESS,      // llvm.masked.compressstore(val, ptr, mask)
  VF_EXPAND,        // llvm.masked.expandload(ptr, mask, passthru)
  VF_X86_MASKSTORE, // llvm.x86.avx{,2}.maskstore.*(ptr, mask, val)
  VF_X86_MASKLOAD,  // llvm.x86.avx{,2}.maskload.*(ptr, mask)
  VF_MASKMOV,       // llvm.x86.sse2.maskmov.dqu(val, mask, ptr): a non-temporal store
  VF_X86_SCATTER,   // llvm.x86.avx512[.mask].scatter*(base, mask, index, val, scale)
  VF_X86_GATHER     // llvm.x86.avx2.gather.*, llvm.x86.avx512[.mask].gather*(src, base, index, mask,
                    // scale)
};

VecForm vecForm(const Instruction &I) {
  const auto *CI = dyn_cast<CallInst>(&I);
  const Function *Fn = CI ? CI->getCalledFunction() : nullptr;
  if (!Fn || !Fn->isIntrinsic())
    return VF_NONE;
  switch (Fn->getIntrinsicID()) {
  case Intrinsic::masked_store: return VF_MASKED_STORE;
  case Intrinsic::masked_load: return VF_MASKED_LOAD;
  case Intrinsic::masked_scatter: return VF_SCATTER;
  case Intrinsic::masked_gather: return VF_GATHER;
  case Intrinsic::masked_compressstore: return VF_COMPRESS;
  case Intrinsic::masked_expandload: return VF_EXPAND;
  case Intrinsic::x86_sse2_maskmov_dqu: return VF_MASKMOV;
  default: break;
  }
  StringRef n = Fn->getName();
  if (n.startswith("llvm.x86.avx.maskstore.") || n.startswith("llvm.x86.avx2.maskstore."))
    return VF_X86_MASKSTORE;
  if (n.startswith("llvm.x86.avx.maskload.") || n.startswith("llvm.x86.avx2.maskload."))
    return VF_X86_MASKLOAD;
  if (n.contains("pf.")) // gatherpf / scatterpf: prefetches
    return VF_NONE;
  if (n.startswith("llvm.x86.avx512.mask.scatter") || n.startswith("llvm.x86.avx512.scatter"))
    return VF_X86_SCATTER;
  if (n.startswith("llvm.x86.avx2.gather.") || n.startswith("llvm.x86.avx512.mask.gather") ||
      n.startswith("llvm.x86.avx512.gather"))
    return VF_X86_GATHER;
  return VF_NONE;
}

// The one pointer of a contiguous masked access (null for scatter/gather).
Value *vecPointer(CallInst *CI, VecForm f) {
  switch (f) {
  case VF_MASKED_STORE:
  case VF_COMPRESS: return CI->getArgOperand(1);
  case VF_MASKED_LOAD:
  case VF_EXPAND:
  case VF_X86_MASKSTORE:
  case VF_X86_MASKLOAD: return CI->getArgOperand(0);
  case VF_MASKMOV: return CI->getArgOperand(2);
  case VF_X86_SCATTER: return CI->getArgOperand(0);
  case VF_X86_GATHER: return CI->getArgOperand(1);
  default: return nullptr;
  }
}

// The first N lanes of vector V (null if it has fewer).
Value *firstLanes(IRBuilder<> &B, Value *V, unsigned N) {
  unsigned n = cast<FixedVectorType>(V->getType())->getNumElements();
  if (n < N)
    return nullptr;
  if (n == N)
    return V;
  std::vector<int> idx;
  for (unsigned k = 0; k < N; k++)
    idx.push_back((int)k);
  return B.CreateShuffleVector(V, idx);
}

// The first N lanes of a mask as <N x i1>: from an <M x i1> vector, an iM bit mask, or a vector
// whose lanes' top bits are the mask (x86 maskload/maskstore, AVX2 gathers, maskmovdqu).
Value *laneMask(IRBuilder<> &B, Value *M, unsigned N) {
  if (auto *IT = dyn_cast<IntegerType>(M->getType())) {
    M = B.CreateBitCast(M, FixedVectorType::get(B.getInt1Ty(), IT->getBitWidth()));
  } else if (auto *VT = dyn_cast<FixedVectorType>(M->getType())) {
    Type *E = VT->getElementType();
    if (!E->isIntegerTy(1)) {
      if (E->isFloatingPointTy())
        M = B.CreateBitCast(
            M, FixedVectorType::get(B.getIntNTy(E->getPrimitiveSizeInBits()), VT->getNumElements()));
      else if (!E->isIntegerTy())
        return nullptr;
      M = B.CreateICmpSLT(M, Constant::getNullValue(M->getType()));
    }
  } else {
    return nullptr;
  }
  return firstLanes(B, M, N);
}

// Lanes lo .. lo+cnt-1 (cnt <= 64) of an <N x i1> mask as the low bits of an i64.
Value *maskBits(IRBuilder<> &B, Value *M, unsigned lo, unsigned cnt) {
  unsigned n = cast<FixedVectorType>(M->getType())->getNumElements();
  if (lo || cnt != n) {
    std::vector<int> idx;
    for (unsigned k = 0; k < cnt; k++)
      idx.push_back((int)(lo + k));
    M = B.CreateShuffleVector(M, idx);
  }
  return B.CreateZExt(B.CreateBitCast(M, B.getIntNTy(cnt)), B.getInt64Ty());
}

// Instruments one masked / compressing / scatter-gather access; false if its form is not one
// this pass understands (left untraced).
// Whether a masked access is to a stack slot of the function (left out like a plain one).
bool vecOnStack(CallInst *CI, VecForm f) {
  if (f == VF_SCATTER || f == VF_GATHER)
    return isStackSlot(CI->getArgOperand(f == VF_SCATTER ? 1 : 0));
  return isStackSlot(vecPointer(CI, f));
}

bool instrumentVector(Function &F, CallInst *CI, VecForm f, const Hooks &h, const DataLayout &DL) {
  bool store = f == VF_MASKED_STORE || f == VF_SCATTER || f == VF_COMPRESS || f == VF_X86_MASKSTORE ||
               f == VF_MASKMOV || f == VF_X86_SCATTER;
  // A store is recorded after it (the runtime reads the value back), a load before it.
  IRBuilder<> B(store ? CI->getNextNode() : CI);
  unsigned kind = f == VF_MASKMOV ? K_NTSTORE : store ? K_STORE : K_LOAD;
  Value *data = nullptr, *mask = nullptr; // the lanes' values (or the loaded vector), the mask
  switch (f) {
  case VF_MASKED_STORE: data = CI->getArgOperand(0); mask = CI->getArgOperand(3); break;
  case VF_MASKED_LOAD: data = CI; mask = CI->getArgOperand(2); break;
  case VF_SCATTER: data = CI->getArgOperand(0); mask = CI->getArgOperand(3); break;
  case VF_GATHER: data = CI; mask = CI->getArgOperand(2); break;
  case VF_COMPRESS: data = CI->getArgOperand(0); mask = CI->getArgOperand(2); break;
  case VF_EXPAND: data = CI; mask = CI->getArgOperand(1); break;
  case VF_X86_MASKSTORE: data = CI->getArgOperand(2); mask = CI->getArgOperand(1); break;
  case VF_X86_MASKLOAD: data = CI; mask = CI->getArgOperand(1); break;
  case VF_MASKMOV: data = CI->getArgOperand(0); mask = CI->getArgOperand(1); break;
  case VF_X86_SCATTER: data = CI->getArgOperand(3); mask = CI->getArgOperand(1); break;
  case VF_X86_GATHER: data = CI; mask = CI->getArgOperand(3); break;
  default: return false;
  }
  auto *VT = dyn_cast<FixedVectorType>(data->getType());
  if (!VT)
    return false;
  unsigned N = VT->getNumElements();
  Type *E = VT->getElementType();
  uint64_t esize = DL.getTypeStoreSize(E);
  if (DL.getTypeAllocSize(E) != esize || !esize)
    return false; // lanes not laid out at their store size (i1, x86_fp80): not modelled
  Value *index = nullptr;
  if (f == VF_X86_SCATTER || f == VF_X86_GATHER) {
    index = CI->getArgOperand(2);
    auto *IT = dyn_cast<FixedVectorType>(index->getType());
    if (!IT || !isa<ConstantInt>(CI->getArgOperand(4)))
      return false;
    N = std::min(N, IT->getNumElements()); // e.g. _mm_i64gather_epi32: 2 indices, 4 result lanes
  }
  Value *lanes = laneMask(B, mask, N);
  if (!lanes)
    return false;
  Type *I64 = B.getInt64Ty();
  Type *P = B.getInt8PtrTy();
  if (f == VF_COMPRESS || f == VF_EXPAND) {
    // popcount(mask) consecutive elements from the pointer
    Value *n = B.CreateAddReduce(B.CreateZExt(lanes, FixedVectorType::get(I64, N)));
    B.CreateCall(f == VF_COMPRESS ? h.store : h.load,
                 {B.CreatePointerCast(vecPointer(CI, f), P), B.CreateMul(n, ConstantInt::get(I64, esize))});
    return true;
  }
  if (f == VF_SCATTER || f == VF_GATHER || f == VF_X86_SCATTER || f == VF_X86_GATHER) {
    // Each lane's address into a stack slot the runtime reads.
    auto *AT = FixedVectorType::get(I64, N);
    Value *addrs;
    if (index) {
      Value *base = B.CreatePtrToInt(vecPointer(CI, f), I64);
      uint64_t scale = cast<ConstantInt>(CI->getArgOperand(4))->getZExtValue();
      Value *idx = B.CreateSExt(firstLanes(B, index, N), AT);
      addrs = B.CreateAdd(B.CreateVectorSplat(N, base), B.CreateMul(idx, ConstantInt::get(AT, scale)));
    } else {
      addrs = B.CreatePtrToInt(f == VF_SCATTER ? CI->getArgOperand(1) : CI->getArgOperand(0), AT);
    }
    IRBuilder<> Entry(&*F.getEntryBlock().getFirstInsertionPt());
    AllocaInst *AS = Entry.CreateAlloca(AT, nullptr, "pmt.addrs");
    B.CreateStore(addrs, AS);
    for (unsigned lo = 0; lo < N; lo += 64) {
      unsigned cnt = std::min(64u, N - lo);
      Value *a = B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), B.CreatePointerCast(AS, P), lo * 8);
      B.CreateCall(h.lanes, {B.getInt32(kind), a, ConstantInt::get(I64, esize), ConstantInt::get(I64, cnt),
                             maskBits(B, lanes, lo, cnt)});
    }
    return true;
  }
  Value *base = B.CreatePointerCast(vecPointer(CI, f), P);
  for (unsigned lo = 0; lo < N; lo += 64) {
    unsigned cnt = std::min(64u, N - lo);
    Value *p = lo ? B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), base, lo * esize) : base;
    B.CreateCall(h.masked, {B.getInt32(kind), p, ConstantInt::get(I64, esize), ConstantInt::get(I64, cnt),
                            maskBits(B, lanes, lo, cnt)});
  }
  return true;
}

// Instructions that cost no machine instruction of their own.
bool isFree(const Instruction &I) {
  if (isa<PHINode>(I) || isa<DbgInfoIntrinsic>(I) || isa<UnreachableInst>(I))
    return true;
  if (const auto *C = dyn_cast<CastInst>(&I))
    if (C->isNoopCast(I.getModule()->getDataLayout()))
      return true;
  if (const auto *II = dyn_cast<IntrinsicInst>(&I)) {
    switch (II->getIntrinsicID()) {
    case Intrinsic::lifetime_start:
    case Intrinsic::lifetime_end:
    case Intrinsic::assume:
    case Intrinsic::invariant_start:
    case Intrinsic::invariant_end:
    case Intrinsic::experimental_noalias_scope_decl:
    case Intrinsic::donothing:
      return true;
    default:
      break;
    }
  }
  return false;
}

// The thread-local instruction counter the runtime defines (pmtrace_rt.c).
GlobalVariable *icountVar(Module &M) {
  Type *I64 = Type::getInt64Ty(M.getContext());
  if (GlobalVariable *G = M.getNamedGlobal("__pmt_icount"))
    return G;
  auto *G = new GlobalVariable(M, I64, false, GlobalValue::ExternalLinkage, nullptr, "__pmt_icount");
  // General-dynamic: the linker relaxes it to a plain TLS offset in an executable that links the
  // runtime; an instrumented shared library still works, at the cost of a lookup per block.
  G->setThreadLocalMode(GlobalValue::GeneralDynamicTLSModel);
  return G;
}

// ---------- library calls that access memory: libc copies and sets, libatomic ----------

// A libc call that copies or sets memory: memcpy / memmove / mempcpy / memset / bzero /
// explicit_bzero, their `_FORTIFY_SOURCE` forms (`__memcpy_chk`, ...) and the wide forms
// (`wmemcpy`, ...: `unit` = sizeof(wchar_t)). Such a call stays a call with `-fno-builtin`,
// under `_FORTIFY_SOURCE` when the length is not known, and for mempcpy; traced as
// llvm.memcpy / llvm.memset are.
struct MemCall {
  Value *dst = nullptr, *src = nullptr, *len = nullptr;
  uint64_t unit = 1;
};

bool memCall(const Instruction &I, MemCall &mc) {
  const auto *CI = dyn_cast<CallInst>(&I);
  const Function *Fn = CI ? CI->getCalledFunction() : nullptr;
  if (!Fn || !Fn->isDeclaration() || Fn->isIntrinsic())
    return false;
  StringRef n = Fn->getName();
  bool chk = n.startswith("__") && n.endswith("_chk");
  if (chk)
    n = n.drop_front(2).drop_back(4);
  bool wide = n.startswith("w");
  if (wide)
    n = n.drop_front(1);
  int src, len;
  if (n == "memcpy" || n == "memmove" || n == "mempcpy") {
    src = 1;
    len = 2;
  } else if (n == "memset") {
    src = -1;
    len = 2;
  } else if (!wide && (n == "bzero" || n == "explicit_bzero")) {
    src = -1;
    len = 1;
  } else {
    return false;
  }
  if (CI->arg_size() < (unsigned)len + 1 + (chk ? 1 : 0) || !CI->getArgOperand(0)->getType()->isPointerTy() ||
      (src >= 0 && !CI->getArgOperand(src)->getType()->isPointerTy()) ||
      !CI->getArgOperand(len)->getType()->isIntegerTy())
    return false;
  mc.dst = CI->getArgOperand(0);
  mc.src = src >= 0 ? CI->getArgOperand(src) : nullptr;
  mc.len = CI->getArgOperand(len);
  mc.unit = 1;
  if (wide) {
    mc.unit = 4; // wchar_t on Linux; clang records it as the module flag wchar_size
    if (auto *W = mdconst::extract_or_null<ConstantInt>(I.getModule()->getModuleFlag("wchar_size")))
      mc.unit = W->getZExtValue();
  }
  return true;
}

// A libc string or I/O call that writes memory the program passes it (strcpy, snprintf, read,
// fgets, strdup, ...) or reads it (write, fwrite, fputs): libc is not instrumented, so after
// the call the runtime (`__pmt_strop`) computes from the call's result and the memory what it
// wrote and records it as memcpy is. The kinds are the runtime's S_* numbers.
enum StrKind : unsigned {
  S_CPY = 1, S_PCPY, S_NCPY, S_CAT, S_NCAT, S_MEMCCPY, S_DUP, S_NDUP, S_PRINTF, S_NPRINTF, S_READ,
  S_FREAD, S_GETS, S_WRITE, S_FWRITE, S_PUTS
};

struct StrCall {
  unsigned kind = 0;
  Value *dst = nullptr, *src = nullptr, *n = nullptr;
  char ret = 0; // how the result reaches the hook: 'p' pointer, 's' signed, 'u' unsigned, 0 not at all
  uint64_t unit = 1;
};

// Each function by its name and its C prototype as glibc declares it (`args`: 'p' a pointer,
// 'i' an integer, one letter per parameter before any `...`; `ret` as in StrCall), with the
// positions of its destination, source and count (-1: none). The `__*_chk` forms of
// `_FORTIFY_SOURCE` take the destination's size (and a flag) at their own positions.
struct StrFn {
  const char *name;
  unsigned kind;
  const char *args;
  int dst, src, n;
  char ret;
};

const StrFn strFns[] = {
    {"strcpy", S_CPY, "pp", 0, 1, -1, 'p'},
    {"__strcpy_chk", S_CPY, "ppi", 0, 1, -1, 'p'},
    {"stpcpy", S_PCPY, "pp", 0, 1, -1, 'p'},
    {"__stpcpy_chk", S_PCPY, "ppi", 0, 1, -1, 'p'},
    {"strncpy", S_NCPY, "ppi", 0, 1, 2, 'p'},
    {"__strncpy_chk", S_NCPY, "ppii", 0, 1, 2, 'p'},
    {"stpncpy", S_NCPY, "ppi", 0, 1, 2, 'p'},
    {"__stpncpy_chk", S_NCPY, "ppii", 0, 1, 2, 'p'},
    {"strcat", S_CAT, "pp", 0, 1, -1, 'p'},
    {"__strcat_chk", S_CAT, "ppi", 0, 1, -1, 'p'},
    {"strncat", S_NCAT, "ppi", 0, 1, 2, 'p'},
    {"__strncat_chk", S_NCAT, "ppii", 0, 1, 2, 'p'},
    {"memccpy", S_MEMCCPY, "ppii", 0, 1, 3, 'p'},
    {"strdup", S_DUP, "p", -1, 0, -1, 'p'},
    {"__strdup", S_DUP, "p", -1, 0, -1, 'p'},
    {"strndup", S_NDUP, "pi", -1, 0, 1, 'p'},
    {"__strndup", S_NDUP, "pi", -1, 0, 1, 'p'},
    // __sprintf_chk(s, flag, slen, fmt, ...), __snprintf_chk(s, maxlen, flag, slen, fmt, ...)
    {"sprintf", S_PRINTF, "pp", 0, -1, -1, 's'},
    {"__sprintf_chk", S_PRINTF, "piip", 0, -1, -1, 's'},
    {"vsprintf", S_PRINTF, "ppp", 0, -1, -1, 's'},
    {"__vsprintf_chk", S_PRINTF, "piipp", 0, -1, -1, 's'},
    {"snprintf", S_NPRINTF, "pip", 0, -1, 1, 's'},
    {"__snprintf_chk", S_NPRINTF, "piiip", 0, -1, 1, 's'},
    {"vsnprintf", S_NPRINTF, "pipp", 0, -1, 1, 's'},
    {"__vsnprintf_chk", S_NPRINTF, "piiipp", 0, -1, 1, 's'},
    // __read_chk(fd, buf, nbytes, buflen), __pread_chk(fd, buf, nbytes, offset, buflen),
    // __recv_chk(fd, buf, n, buflen, flags), __recvfrom_chk(fd, buf, n, buflen, flags, addr, alen)
    {"read", S_READ, "ipi", 1, -1, -1, 's'},
    {"__read_chk", S_READ, "ipii", 1, -1, -1, 's'},
    {"pread", S_READ, "ipii", 1, -1, -1, 's'},
    {"pread64", S_READ, "ipii", 1, -1, -1, 's'},
    {"__pread_chk", S_READ, "ipiii", 1, -1, -1, 's'},
    {"__pread64_chk", S_READ, "ipiii", 1, -1, -1, 's'},
    {"recv", S_READ, "ipii", 1, -1, -1, 's'},
    {"__recv_chk", S_READ, "ipiii", 1, -1, -1, 's'},
    {"recvfrom", S_READ, "ipiipp", 1, -1, -1, 's'},
    {"__recvfrom_chk", S_READ, "ipiiipp", 1, -1, -1, 's'},
    // fread(ptr, size, n, stream), __fread_chk(ptr, ptrlen, size, n, stream): `n` is the size
    {"fread", S_FREAD, "piip", 0, -1, 1, 'u'},
    {"fread_unlocked", S_FREAD, "piip", 0, -1, 1, 'u'},
    {"__fread_chk", S_FREAD, "piiip", 0, -1, 2, 'u'},
    {"__fread_unlocked_chk", S_FREAD, "piiip", 0, -1, 2, 'u'},
    // fgets(s, n, stream), __fgets_chk(s, size, n, stream)
    {"fgets", S_GETS, "pip", 0, -1, -1, 'p'},
    {"fgets_unlocked", S_GETS, "pip", 0, -1, -1, 'p'},
    {"__fgets_chk", S_GETS, "piip", 0, -1, -1, 'p'},
    {"__fgets_unlocked_chk", S_GETS, "piip", 0, -1, -1, 'p'},
    // Writers: the source they read.
    {"write", S_WRITE, "ipi", -1, 1, -1, 's'},
    {"pwrite", S_WRITE, "ipii", -1, 1, -1, 's'},
    {"pwrite64", S_WRITE, "ipii", -1, 1, -1, 's'},
    {"send", S_WRITE, "ipii", -1, 1, -1, 's'},
    {"sendto", S_WRITE, "ipiipi", -1, 1, -1, 's'},
    {"fwrite", S_FWRITE, "piip", -1, 0, 1, 'u'},
    {"fwrite_unlocked", S_FWRITE, "piip", -1, 0, 1, 'u'},
    {"fputs", S_PUTS, "pp", -1, 0, -1, 's'},
    {"fputs_unlocked", S_PUTS, "pp", -1, 0, -1, 's'},
    {"puts", S_PUTS, "p", -1, 0, -1, 's'},
    // The wide forms (`unit` = sizeof(wchar_t)): the string functions under their wcs / wcp names.
    {"wcscpy", S_CPY, "pp", 0, 1, -1, 'p'},
    {"__wcscpy_chk", S_CPY, "ppi", 0, 1, -1, 'p'},
    {"wcpcpy", S_PCPY, "pp", 0, 1, -1, 'p'},
    {"__wcpcpy_chk", S_PCPY, "ppi", 0, 1, -1, 'p'},
    {"wcsncpy", S_NCPY, "ppi", 0, 1, 2, 'p'},
    {"__wcsncpy_chk", S_NCPY, "ppii", 0, 1, 2, 'p'},
    {"wcpncpy", S_NCPY, "ppi", 0, 1, 2, 'p'},
    {"__wcpncpy_chk", S_NCPY, "ppii", 0, 1, 2, 'p'},
    {"wcscat", S_CAT, "pp", 0, 1, -1, 'p'},
    {"__wcscat_chk", S_CAT, "ppi", 0, 1, -1, 'p'},
    {"wcsncat", S_NCAT, "ppi", 0, 1, 2, 'p'},
    {"__wcsncat_chk", S_NCAT, "ppii", 0, 1, 2, 'p'},
    {"wcsdup", S_DUP, "p", -1, 0, -1, 'p'},
};

bool strCall(const Instruction &I, StrCall &sc) {
  const auto *CI = dyn_cast<CallInst>(&I);
  const Function *Fn = CI ? CI->getCalledFunction() : nullptr;
  if (!Fn || !Fn->isDeclaration() || Fn->isIntrinsic() || CI->isMustTailCall())
    return false;
  StringRef name = Fn->getName();
  for (const StrFn &f : strFns) {
    if (name != f.name)
      continue;
    // A program may declare its own function of that name with other types: left alone.
    StringRef args(f.args);
    if (CI->arg_size() < args.size() || (!Fn->isVarArg() && CI->arg_size() != args.size()))
      return false;
    for (unsigned i = 0; i < args.size(); i++) {
      Type *T = CI->getArgOperand(i)->getType();
      if (args[i] == 'p' ? !T->isPointerTy() : !T->isIntegerTy())
        return false;
    }
    Type *R = CI->getType();
    if (f.ret == 'p' ? !R->isPointerTy() : !R->isIntegerTy())
      return false;
    sc.kind = f.kind;
    sc.dst = f.dst >= 0 ? CI->getArgOperand(f.dst) : nullptr;
    sc.src = f.src >= 0 ? CI->getArgOperand(f.src) : nullptr;
    sc.n = f.n >= 0 ? CI->getArgOperand(f.n) : nullptr;
    sc.ret = f.ret;
    sc.unit = 1;
    if (name.startswith("wc") || name.startswith("__wc")) {
      sc.unit = 4; // wchar_t on Linux; clang records it as the module flag wchar_size
      if (auto *W = mdconst::extract_or_null<ConstantInt>(I.getModule()->getModuleFlag("wchar_size")))
        sc.unit = W->getZExtValue();
    }
    return true;
  }
  return false;
}

// A call into libatomic, as clang emits it for an atomic access it cannot inline (16 bytes
// without -mcx16, a size that is not a power of two, a misaligned object): the generic
// `__atomic_load/store/exchange/compare_exchange(size, ptr, ...)` with buffers, and the sized
// `__atomic_*_N(ptr, ...)` (N = 1, 2, 4, 8, 16) with values (a 16-byte one as two i64s).
enum AtomicForm { AF_NONE, AF_LOAD, AF_STORE, AF_XCHG, AF_CAS, AF_FETCH };

struct AtomicCall {
  AtomicForm form = AF_NONE;
  bool generic = false;
  uint64_t size = 0; // N of a sized form
  AtomicRMWInst::BinOp op = AtomicRMWInst::BAD_BINOP;
  bool opFetch = false;          // `__atomic_add_fetch_N`: returns the new value
  std::vector<Value *> value;    // a sized form's value (desired, operand), as its pieces
};

AtomicCall atomicCall(const Instruction &I) {
  AtomicCall ac;
  const auto *CI = dyn_cast<CallInst>(&I);
  const Function *Fn = CI ? CI->getCalledFunction() : nullptr;
  if (!Fn || !Fn->isDeclaration() || Fn->isIntrinsic() || !Fn->getName().startswith("__atomic_"))
    return ac;
  StringRef n = Fn->getName().drop_front(9);
  unsigned na = CI->arg_size();
  auto ptrArg = [&](unsigned i) { return i < na && CI->getArgOperand(i)->getType()->isPointerTy(); };
  auto intArg = [&](unsigned i) { return i < na && CI->getArgOperand(i)->getType()->isIntegerTy(); };
  // The generic forms.
  static const struct {
    const char *name;
    AtomicForm form;
    unsigned args;
  } generic[] = {
      {"load", AF_LOAD, 4}, {"store", AF_STORE, 4}, {"exchange", AF_XCHG, 5}, {"compare_exchange", AF_CAS, 6}};
  for (const auto &g : generic)
    if (n == g.name) {
      if (na != g.args || !intArg(0))
        return ac;
      for (unsigned i = 1; i < g.args - (g.form == AF_CAS ? 2 : 1); i++)
        if (!ptrArg(i))
          return ac;
      ac.form = g.form;
      ac.generic = true;
      return ac;
    }
  // The sized forms: NAME_N.
  size_t us = n.rfind('_');
  if (us == StringRef::npos)
    return ac;
  StringRef base = n.substr(0, us);
  uint64_t N;
  if (n.substr(us + 1).getAsInteger(10, N) || (N != 1 && N != 2 && N != 4 && N != 8 && N != 16))
    return ac;
  static const struct {
    const char *name;
    AtomicRMWInst::BinOp op;
  } ops[] = {{"add", AtomicRMWInst::Add}, {"sub", AtomicRMWInst::Sub}, {"and", AtomicRMWInst::And},
             {"or", AtomicRMWInst::Or},   {"xor", AtomicRMWInst::Xor}, {"nand", AtomicRMWInst::Nand}};
  unsigned first = 1, orders = 1; // the value's pieces: args [first, na - orders)
  if (base == "load") {
    ac.form = AF_LOAD;
  } else if (base == "store") {
    ac.form = AF_STORE;
  } else if (base == "exchange") {
    ac.form = AF_XCHG;
  } else if (base == "compare_exchange") {
    ac.form = AF_CAS;
    first = 2;
    orders = 2;
    if (!ptrArg(1))
      return AtomicCall();
  } else {
    for (const auto &o : ops) {
      if (base == (std::string("fetch_") + o.name)) {
        ac.form = AF_FETCH;
        ac.op = o.op;
      } else if (base == (std::string(o.name) + "_fetch")) {
        ac.form = AF_FETCH;
        ac.op = o.op;
        ac.opFetch = true;
      }
    }
    if (ac.form == AF_NONE)
      return ac;
  }
  if (!ptrArg(0) || na < first + orders || !intArg(na - 1)) // the last argument: an ordering
    return AtomicCall();
  if (ac.form != AF_LOAD) {
    const DataLayout &DL = I.getModule()->getDataLayout();
    uint64_t bytes = 0;
    for (unsigned i = first; i < na - orders; i++) {
      Value *V = CI->getArgOperand(i);
      if (!V->getType()->isIntegerTy() && !V->getType()->isPointerTy() && !V->getType()->isFloatingPointTy())
        return AtomicCall();
      bytes += DL.getTypeStoreSize(V->getType());
      ac.value.push_back(V);
    }
    if (bytes != N)
      return AtomicCall();
  }
  ac.size = N;
  return ac;
}

// A memory order argument: 0 relaxed, 1 consume, 2 acquire, 3 release, 4 acq_rel, 5 seq_cst
// (an order not known at compile time counts as seq_cst).
unsigned memOrder(Value *V) {
  if (auto *C = dyn_cast<ConstantInt>(V))
    return C->getZExtValue() <= 5 ? (unsigned)C->getZExtValue() : 5;
  return 5;
}

// The value an atomicrmw writes, from the value it read and its operand; null if not modelled.
Value *rmwResult(IRBuilder<> &B, AtomicRMWInst::BinOp op, Value *old, Value *v) {
  switch (op) {
  case AtomicRMWInst::Xchg: return v;
  case AtomicRMWInst::Add: return B.CreateAdd(old, v);
  case AtomicRMWInst::Sub: return B.CreateSub(old, v);
  case AtomicRMWInst::And: return B.CreateAnd(old, v);
  case AtomicRMWInst::Nand: return B.CreateNot(B.CreateAnd(old, v));
  case AtomicRMWInst::Or: return B.CreateOr(old, v);
  case AtomicRMWInst::Xor: return B.CreateXor(old, v);
  case AtomicRMWInst::Max: return B.CreateSelect(B.CreateICmpSGT(old, v), old, v);
  case AtomicRMWInst::Min: return B.CreateSelect(B.CreateICmpSLT(old, v), old, v);
  case AtomicRMWInst::UMax: return B.CreateSelect(B.CreateICmpUGT(old, v), old, v);
  case AtomicRMWInst::UMin: return B.CreateSelect(B.CreateICmpULT(old, v), old, v);
  case AtomicRMWInst::FAdd: return B.CreateFAdd(old, v);
  case AtomicRMWInst::FSub: return B.CreateFSub(old, v);
  default: return nullptr;
  }
}

// Stack buffers for the values the pass hands the runtime (a sync event's value), one per
// type and use, in the function's entry block.
struct ValueSlots {
  Function &F;
  std::map<std::pair<Type *, unsigned>, AllocaInst *> slots;
  AllocaInst *get(Type *T, unsigned use = 0) {
    AllocaInst *&A = slots[{T, use}];
    if (!A) {
      IRBuilder<> Entry(&*F.getEntryBlock().getFirstInsertionPt());
      A = Entry.CreateAlloca(T, nullptr, "pmt.value");
      A->setAlignment(Align(16));
    }
    return A;
  }
  // `V` in a slot; the slot's address as i8*.
  Value *hold(IRBuilder<> &B, Value *V, unsigned use = 0) {
    AllocaInst *A = get(V->getType(), use);
    B.CreateStore(V, A);
    return B.CreatePointerCast(A, B.getInt8PtrTy());
  }
  // Values stored one after another (the pieces of a libatomic argument or result: a 16-byte
  // value as two i64s, low half first) in an n-byte slot; its address as i8*.
  Value *pack(IRBuilder<> &B, const DataLayout &DL, const std::vector<Value *> &pieces, uint64_t n, unsigned use) {
    AllocaInst *A = get(ArrayType::get(B.getInt8Ty(), n), use);
    Value *P = B.CreatePointerCast(A, B.getInt8PtrTy());
    uint64_t off = 0;
    for (Value *V : pieces) {
      Value *at = B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), P, off);
      B.CreateStore(V, B.CreatePointerCast(at, PointerType::getUnqual(V->getType())));
      off += DL.getTypeStoreSize(V->getType());
    }
    return P;
  }
};

// The pieces of a call's result (a struct returned in registers, `{ i64, i64 }`: its fields).
std::vector<Value *> resultPieces(IRBuilder<> &B, CallInst *CI) {
  std::vector<Value *> out;
  if (auto *ST = dyn_cast<StructType>(CI->getType())) {
    for (unsigned k = 0; k < ST->getNumElements(); k++)
      out.push_back(B.CreateExtractValue(CI, k));
  } else {
    out.push_back(CI);
  }
  return out;
}

// Instruments one libatomic call as the native atomic access it stands for (see the native
// cases in instrument()): loads as `load` / `acquire`, stores as `store` / `release` / `rmw`,
// exchange, compare-exchange and fetch-op as `rmw` with the value written; a generic form's
// buffers, where not on the stack, are read (`load`) and written (`store`) as the library
// does.
void instrumentAtomicCall(CallInst *CI, const AtomicCall &ac, const Hooks &h, ValueSlots &slots,
                          const DataLayout &DL) {
  IRBuilder<> Before(CI), After(CI->getNextNode());
  Type *P8 = Before.getInt8PtrTy();
  unsigned g = ac.generic ? 1 : 0; // the generic forms take the size first
  Value *ptr = CI->getArgOperand(g);
  Value *size = ac.generic ? CI->getArgOperand(0) : (Value *)Before.getInt64(ac.size);
  size = ac.generic ? Before.CreateZExtOrTrunc(size, Before.getInt64Ty()) : size;
  unsigned ord = memOrder(CI->getArgOperand(CI->arg_size() - (ac.form == AF_CAS ? 2 : 1)));
  auto i8p = [&](IRBuilder<> &B, Value *V) { return B.CreatePointerCast(V, P8); };
  auto kind = [&](unsigned k) { return ConstantInt::get(Type::getInt32Ty(CI->getContext()), k); };
  // A buffer the library reads / writes, traced unless it is a stack slot.
  auto readsBuf = [&](Value *buf) {
    if (!isStackSlot(buf))
      Before.CreateCall(h.load, {i8p(Before, buf), size});
  };
  auto writesBuf = [&](Value *buf, Value *n) {
    if (!isStackSlot(buf))
      After.CreateCall(h.store, {i8p(After, buf), n});
  };
  Value *P = i8p(Before, ptr);
  switch (ac.form) {
  case AF_LOAD:
    if (ord == 0 || ord == 3)
      Before.CreateCall(h.load, {P, size});
    else
      After.CreateCall(h.sync, {kind(K_ACQUIRE), P, size, ConstantPointerNull::get(Before.getInt8PtrTy())});
    if (ac.generic)
      writesBuf(CI->getArgOperand(2), size);
    break;
  case AF_STORE: {
    Value *val = ac.generic ? i8p(Before, CI->getArgOperand(2)) : slots.pack(Before, DL, ac.value, ac.size, 0);
    if (ac.generic)
      readsBuf(CI->getArgOperand(2));
    if (ord == 5)
      Before.CreateCall(h.sync, {kind(K_RMW), P, size, val});
    else if (ord == 3 || ord == 4)
      Before.CreateCall(h.sync, {kind(K_RELEASE), P, size, val});
    else
      After.CreateCall(h.store, {P, size});
    break;
  }
  case AF_XCHG: {
    Value *val = ac.generic ? i8p(Before, CI->getArgOperand(2)) : slots.pack(Before, DL, ac.value, ac.size, 0);
    if (ac.generic)
      readsBuf(CI->getArgOperand(2));
    After.CreateCall(h.sync, {kind(K_RMW), P, size, val});
    if (ac.generic)
      writesBuf(CI->getArgOperand(3), size);
    break;
  }
  case AF_CAS: {
    // Succeeded: the desired value was written; failed: the location keeps its value, which
    // the library copied into *expected (x86's locked cmpxchg writes it back: still an rmw).
    Value *exp = CI->getArgOperand(g + 1);
    Value *des = ac.generic ? i8p(Before, CI->getArgOperand(3)) : slots.pack(Before, DL, ac.value, ac.size, 0);
    readsBuf(exp);
    if (ac.generic)
      readsBuf(CI->getArgOperand(3));
    Value *ok = CI->getType()->isIntegerTy(1) ? (Value *)CI
                                               : After.CreateICmpNE(CI, Constant::getNullValue(CI->getType()));
    After.CreateCall(h.sync, {kind(K_RMW), P, size, After.CreateSelect(ok, des, i8p(After, exp))});
    writesBuf(exp, After.CreateSelect(ok, After.getInt64(0), size));
    break;
  }
  case AF_FETCH: {
    Value *out;
    if (ac.opFetch) {
      out = slots.pack(After, DL, resultPieces(After, CI), ac.size, 0);
    } else {
      // new = old OP operand, on N-byte integers
      Type *IN = After.getIntNTy(8 * ac.size);
      Value *oldP = slots.pack(After, DL, resultPieces(After, CI), ac.size, 0);
      Value *valP = slots.pack(After, DL, ac.value, ac.size, 1);
      Value *old = After.CreateLoad(IN, After.CreatePointerCast(oldP, PointerType::getUnqual(IN)));
      Value *v = After.CreateLoad(IN, After.CreatePointerCast(valP, PointerType::getUnqual(IN)));
      out = slots.hold(After, rmwResult(After, ac.op, old, v));
    }
    After.CreateCall(h.sync, {kind(K_RMW), P, size, out});
    break;
  }
  default: break;
  }
}

bool instrument(Function &F) {
  if (F.isDeclaration() || F.getName().startswith("__pmt_"))
    return false;
  Module &M = *F.getParent();
  const DataLayout &DL = M.getDataLayout();
  Hooks h = getHooks(M);
  std::vector<Instruction *> work;
  // Non-memory instructions per block, counted before any hook is added.
  std::vector<std::pair<BasicBlock *, uint64_t>> blocks;
  for (BasicBlock &BB : F) {
    uint64_t n = 0;
    for (Instruction &I : BB) {
      if (isa<LoadInst>(I) || isa<StoreInst>(I) || isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I) ||
          isa<FenceInst>(I) || isa<CallInst>(I))
        work.push_back(&I);
      // Stack-slot loads and stores are not traced: they are plain instructions here.
      VecForm vf = vecForm(I);
      MemCall mc;
      StrCall sc;
      bool traced = isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I) || isa<MemIntrinsic>(I) ||
                    memCall(I, mc) || strCall(I, sc) || atomicCall(I).form != AF_NONE ||
                    (vf != VF_NONE && !vecOnStack(cast<CallInst>(&I), vf)) ||
                    (isa<LoadInst>(I) && !isStackSlot(cast<LoadInst>(I).getPointerOperand())) ||
                    (isa<StoreInst>(I) && !isStackSlot(cast<StoreInst>(I).getPointerOperand()));
      if (!traced && !isFree(I))
        n++;
    }
    if (n)
      blocks.push_back({&BB, n});
  }
  bool changed = false;
  ValueSlots slots{F, {}};
  auto size = [&](Type *T) { return ConstantInt::get(Type::getInt64Ty(M.getContext()), DL.getTypeStoreSize(T)); };
  auto code = [&](unsigned k) { return ConstantInt::get(Type::getInt32Ty(M.getContext()), k); };
  // Whether an atomic access synchronises across threads (not only with a signal handler).
  auto crossThread = [](SyncScope::ID s) { return s != SyncScope::SingleThread; };
  for (Instruction *I : work) {
    IRBuilder<> After(I->getNextNode());
    IRBuilder<> Before(I);
    if (auto *L = dyn_cast<LoadInst>(I)) {
      if (isStackSlot(L->getPointerOperand()))
        continue;
      if (L->isAtomic() && isAcquireOrStronger(L->getOrdering()) && crossThread(L->getSyncScopeID())) {
        // An acquire load (C11 acquire / seq_cst, C++ atomic load): `acquire`, a load that
        // synchronises, recorded after it so it follows the release whose value it read.
        Value *P = After.CreatePointerCast(L->getPointerOperand(), After.getInt8PtrTy());
        Value *None = ConstantPointerNull::get(After.getInt8PtrTy());
        After.CreateCall(h.sync, {code(K_ACQUIRE), P, size(L->getType()), None});
      } else {
        Before.CreateCall(h.load, {Before.CreatePointerCast(L->getPointerOperand(), Before.getInt8PtrTy()),
                                   size(L->getType())});
      }
    } else if (auto *S = dyn_cast<StoreInst>(I)) {
      if (isStackSlot(S->getPointerOperand()))
        continue;
      Value *N = size(S->getValueOperand()->getType());
      if (S->isAtomic() && S->getOrdering() == AtomicOrdering::SequentiallyConsistent) {
        // An xchg on x86: `rmw` with the value stored, recorded before the store (its release
        // half must precede any acquire that reads the value).
        Value *P = Before.CreatePointerCast(S->getPointerOperand(), Before.getInt8PtrTy());
        Before.CreateCall(h.sync, {code(K_RMW), P, N, slots.hold(Before, S->getValueOperand())});
      } else if (S->isAtomic() && isReleaseOrStronger(S->getOrdering()) && crossThread(S->getSyncScopeID())) {
        // A release store (C11 release, atomic_flag_clear_explicit(release)): `release` with the
        // value stored, recorded before the store, as the runtime records a mutex unlock.
        Value *P = Before.CreatePointerCast(S->getPointerOperand(), Before.getInt8PtrTy());
        Before.CreateCall(h.sync, {code(K_RELEASE), P, N, slots.hold(Before, S->getValueOperand())});
      } else {
        Value *P = After.CreatePointerCast(S->getPointerOperand(), After.getInt8PtrTy());
        if (S->getMetadata(LLVMContext::MD_nontemporal))
          After.CreateCall(h.ntstore, {P, N});
        else
          After.CreateCall(h.store, {P, N});
      }
    } else if (auto *R = dyn_cast<AtomicRMWInst>(I)) {
      // `rmw` with the value it wrote (computed, not read back: another thread may have
      // written the location again by the time the runtime could read it).
      Value *P = After.CreatePointerCast(R->getPointerOperand(), After.getInt8PtrTy());
      Value *N = size(R->getValOperand()->getType());
      if (Value *V = rmwResult(After, R->getOperation(), R, R->getValOperand()))
        After.CreateCall(h.sync, {code(K_RMW), P, N, slots.hold(After, V)});
      else
        After.CreateCall(h.rmw, {P, N});
    } else if (auto *X = dyn_cast<AtomicCmpXchgInst>(I)) {
      // `rmw` whether it succeeded or not (x86's locked cmpxchg writes the old value back on
      // failure), with the value the location holds after it.
      Value *V = After.CreateSelect(After.CreateExtractValue(X, 1), X->getNewValOperand(),
                                    After.CreateExtractValue(X, 0));
      After.CreateCall(h.sync, {code(K_RMW), After.CreatePointerCast(X->getPointerOperand(), After.getInt8PtrTy()),
                                size(X->getNewValOperand()->getType()), slots.hold(After, V)});
    } else if (auto *Fe = dyn_cast<FenceInst>(I)) {
      if (Fe->getOrdering() != AtomicOrdering::SequentiallyConsistent ||
          Fe->getSyncScopeID() == SyncScope::SingleThread)
        continue;
      After.CreateCall(h.fence, {After.getInt32(K_MFENCE)});
    } else if (auto *MI = dyn_cast<MemIntrinsic>(I)) {
      Value *Src = Constant::getNullValue(After.getInt8PtrTy());
      if (auto *MT = dyn_cast<MemTransferInst>(MI))
        Src = After.CreatePointerCast(MT->getRawSource(), After.getInt8PtrTy());
      After.CreateCall(h.memop, {After.CreatePointerCast(MI->getRawDest(), After.getInt8PtrTy()), Src,
                                 After.CreateZExtOrTrunc(MI->getLength(), After.getInt64Ty())});
    } else if (VecForm vf = vecForm(*I)) {
      if (vecOnStack(cast<CallInst>(I), vf) || !instrumentVector(F, cast<CallInst>(I), vf, h, DL))
        continue;
    } else if (auto *II = dyn_cast<IntrinsicInst>(I)) {
      unsigned kind = 0;
      switch (II->getIntrinsicID()) {
      case Intrinsic::x86_sse2_clflush: kind = K_CLFLUSH; break;
      case Intrinsic::x86_clflushopt: kind = K_CLFLUSHOPT; break;
      case Intrinsic::x86_clwb: kind = K_CLWB; break;
      case Intrinsic::x86_sse_sfence: kind = K_SFENCE; break;
      case Intrinsic::x86_sse2_mfence: kind = K_MFENCE; break;
      default: continue;
      }
      if (kind == K_SFENCE || kind == K_MFENCE)
        After.CreateCall(h.fence, {After.getInt32(kind)});
      else
        After.CreateCall(h.flush, {After.getInt32(kind),
                                   After.CreatePointerCast(II->getArgOperand(0), After.getInt8PtrTy())});
    } else if (auto *CI = dyn_cast<CallInst>(I)) {
      MemCall mc;
      if (memCall(*CI, mc)) {
        // As llvm.memcpy / llvm.memset: the source's loads, then the destination's stores.
        Value *Src = mc.src ? After.CreatePointerCast(mc.src, After.getInt8PtrTy())
                            : Constant::getNullValue(After.getInt8PtrTy());
        Value *Len = After.CreateZExtOrTrunc(mc.len, After.getInt64Ty());
        if (mc.unit != 1)
          Len = After.CreateMul(Len, After.getInt64(mc.unit));
        After.CreateCall(h.memop, {After.CreatePointerCast(mc.dst, After.getInt8PtrTy()), Src, Len});
        changed = true;
        continue;
      }
      StrCall sc;
      if (strCall(*CI, sc)) {
        // After the call: the runtime computes from its result what it read and wrote.
        Type *I64 = After.getInt64Ty();
        Value *Null = Constant::getNullValue(After.getInt8PtrTy());
        auto ptr = [&](Value *V) { return V ? After.CreatePointerCast(V, After.getInt8PtrTy()) : Null; };
        Value *N = sc.n ? After.CreateZExtOrTrunc(sc.n, I64) : After.getInt64(0);
        Value *Ret = After.getInt64(0);
        if (sc.ret == 'p')
          Ret = After.CreatePtrToInt(CI, I64);
        else if (sc.ret == 's')
          Ret = After.CreateSExtOrTrunc(CI, I64);
        else if (sc.ret == 'u')
          Ret = After.CreateZExtOrTrunc(CI, I64);
        After.CreateCall(h.strop, {After.getInt32(sc.kind), After.getInt32((uint32_t)sc.unit), ptr(sc.dst),
                                   ptr(sc.src), N, Ret});
        changed = true;
        continue;
      }
      AtomicCall ac = atomicCall(*CI);
      if (ac.form != AF_NONE) {
        instrumentAtomicCall(CI, ac, h, slots, DL);
        changed = true;
        continue;
      }
      auto *IA = dyn_cast<InlineAsm>(CI->getCalledOperand());
      if (!IA)
        continue;
      AsmStmt st = asmStmt(CI, IA);
      AsmText at = asmText(IA->getAsmString(), st, IA->getDialect() == InlineAsm::AD_Intel);
      if (!at.untraced.empty())
        warnUntraced(F, CI, IA->getAsmString(), at.why);
      if (at.ops.empty())
        continue;
      for (const AsmOp &op : at.ops) {
        if (op.kind == K_SFENCE || op.kind == K_MFENCE) {
          After.CreateCall(h.fence, {After.getInt32(op.kind)});
        } else if (Value *A = asmAddress(st, op.addr, After)) {
          After.CreateCall(h.flush, {After.getInt32(op.kind), A});
        }
      }
    } else {
      continue;
    }
    changed = true;
  }
  if (!blocks.empty()) {
    GlobalVariable *G = icountVar(M);
    Type *I64 = Type::getInt64Ty(M.getContext());
    for (auto &bn : blocks) {
      BasicBlock *BB = bn.first;
      auto at = BB->getFirstInsertionPt();
      if (at == BB->end())
        continue; // e.g. a catchswitch block: nothing can be inserted
      IRBuilder<> B(BB, at);
      Value *old = B.CreateLoad(I64, G, "pmt.icount");
      B.CreateStore(B.CreateAdd(old, ConstantInt::get(I64, bn.second)), G);
    }
    changed = true;
  }
  return changed;
}

struct PmTracePass : PassInfoMixin<PmTracePass> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    bool changed = false;
    for (Function &F : M)
      changed |= instrument(F);
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }
};

// The allocation functions whose memory the runtime makes PM under `--pm heap` (and their
// frees). Under -O1 and above LLVM treats them as builtins: GlobalOpt turns a `static T *p =
// malloc(..)` whose pointer never escapes into a global in .bss, and DSE and InstCombine drop
// the stores to, or the whole of, an allocation nothing reads back. The object then stops being
// heap memory exactly when the program never flushes it (a flush makes the pointer escape),
// which is the bug the trace exists to show. So before any optimisation runs, calls to them are
// marked `nobuiltin`. The wrappers' -fno-builtin-malloc (...) flags do the same for C calls; a
// C++ new-expression's call carries a `builtin` attribute that no flag removes, and C++ lets a
// new/delete pair be elided.
bool isAllocCall(StringRef n) {
  static const char *const names[] = {"malloc",  "calloc",        "realloc", "reallocarray",   "free",
                                      "memalign", "aligned_alloc", "valloc",  "posix_memalign", "pvalloc",
                                      "strdup",   "strndup"};
  for (const char *c : names)
    if (n == c)
      return true;
  // operator new / new[] / delete / delete[], every overload (sized, aligned, nothrow)
  return n.startswith("_Znw") || n.startswith("_Zna") || n.startswith("_Zdl") || n.startswith("_Zda");
}

struct PmKeepHeapPass : PassInfoMixin<PmKeepHeapPass> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    bool changed = false;
    for (Function &F : M)
      for (Instruction &I : instructions(F)) {
        auto *CB = dyn_cast<CallBase>(&I);
        Function *Fn = CB ? CB->getCalledFunction() : nullptr;
        if (!Fn || !isAllocCall(Fn->getName()))
          continue;
        CB->removeFnAttr(Attribute::Builtin);
        CB->addFnAttr(Attribute::NoBuiltin);
        changed = true;
      }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "pmsim-trace", "0.1", [](PassBuilder &PB) {
            PB.registerPipelineStartEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(PmKeepHeapPass()); });
            PB.registerOptimizerLastEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(PmTracePass()); });
          }};
}
