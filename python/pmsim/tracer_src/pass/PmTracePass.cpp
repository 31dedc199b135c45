// pmsim tracer: the LLVM pass plugin.
//
// Why it exists: neither sanitizer runtimes, Valgrind nor QEMU see what a persistent-memory
// program does (inline-asm flushes, CLWB/CLFLUSHOPT, store values). This pass instruments the
// optimised IR (it runs at the end of the optimisation pipeline, like TSan, so it traces the
// accesses the program really performs) with calls into the runtime (`pmtrace_rt.c`):
//   loads and stores (the runtime reads the stored value back), atomicrmw / cmpxchg / seq_cst
//   atomic stores (-> rmw), seq_cst fences (-> mfence), llvm.memcpy/memmove/memset, the x86
//   flush and fence intrinsics, masked, compressing/expanding and scatter/gather vector accesses
//   (llvm.masked.*, the x86 maskload/maskstore, maskmovdqu and gather/scatter intrinsics: only
//   the active lanes' bytes), and inline asm recognised by its text (clflush, clflushopt, clwb,
//   sfence, mfence, the old spellings `.byte 0x66; clflush` = CLFLUSHOPT and
//   `.byte 0x66; xsaveopt` = CLWB, and lock-prefixed instructions and xchg with memory = mfence).
//   A flush in asm flushes the operand its text names (`clwb ($1)`), else the first pointer
//   operand. Asm that writes memory in a way not modelled here (rep movs/stos, movnt*, a plain
//   store to a memory operand) is not traced: the pass says so on stderr, once per asm site.
// What it guarantees: every instrumented access becomes exactly one runtime call, issued in the
// thread's program order after the access (before it for loads); the exceptions are a masked or
// scatter/gather access of more than 64 lanes (one call per 64 lanes, in lane order) and an asm
// statement, which gets one call per recognised instruction in it, in the asm's order. Accesses
// whose address is a stack slot of the current function (an alloca that never escapes the IR we
// see) are left out: they are never persistent memory.
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
#include <string>
#include <vector>

using namespace llvm;

namespace {

// Kind codes shared with the runtime and the binary trace format (docs/binary-trace.md).
enum : unsigned {
  K_LOAD = 1, K_STORE = 2, K_NTSTORE = 3, K_CLWB = 5, K_CLFLUSHOPT = 6, K_CLFLUSH = 7, K_SFENCE = 8, K_MFENCE = 9
};

struct Hooks {
  FunctionCallee load, store, ntstore, rmw, memop, flush, fence, masked, lanes;
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
  h.memop = M.getOrInsertFunction("__pmt_memop", V, P, P, I64);
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
// then the inputs, clobbers not counted): the call argument it is (null for an output that is
// not in memory: that is a return value) and whether it is a memory operand (`=*m`, `*m`: the
// argument is the operand's address).
struct AsmOperand {
  Value *arg = nullptr;
  bool memory = false;
};

struct AsmStmt {
  std::vector<AsmOperand> operands;
  bool clobbersMemory = false; // "memory" clobber or a memory output
};

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
    if (C.Type == InlineAsm::isOutput && C.isIndirect)
      st.clobbersMemory = true;
    st.operands.push_back(op);
  }
  return st;
}

// A recognised flush or fence of an asm text: its kind and the operand it names (-1: none).
struct AsmOp {
  unsigned kind;
  int operand;
};

struct AsmText {
  std::vector<AsmOp> ops;    // in the text's order
  std::string untraced;      // the first instruction that writes memory the trace does not see
};

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

// The persist-relevant instructions of one inline-asm text, in order, and whether it writes
// memory that is not traced.
AsmText asmText(StringRef text, const AsmStmt &st, bool intel) {
  std::string t = lower(text);
  AsmText out;
  // Split into instructions at ';' and newlines; a `.byte 0x66` (or `data16`) prefix and a
  // `lock` prefix written as an instruction of its own apply to the next one.
  bool prefix66 = false, pendingLock = false;
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
      std::vector<std::string> bytes = splitOperands(ins.substr(5));
      if (bytes.size() == 1 && bytes[0].find("0x66") != std::string::npos) {
        prefix66 = true;
      } else if (st.clobbersMemory && out.untraced.empty()) {
        out.untraced = ins; // an encoded instruction: it may write memory, we cannot tell
      }
      continue;
    }
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
    if (starts(mn, "clflushopt"))
      out.ops.push_back({K_CLFLUSHOPT, operandRef(first)});
    else if (starts(mn, "clflush"))
      out.ops.push_back({p66 ? K_CLFLUSHOPT : K_CLFLUSH, operandRef(first)});
    else if (starts(mn, "clwb"))
      out.ops.push_back({K_CLWB, operandRef(first)});
    else if (starts(mn, "xsaveopt") && p66)
      out.ops.push_back({K_CLWB, operandRef(first)});
    else if (starts(mn, "sfence"))
      out.ops.push_back({K_SFENCE, -1});
    else if (starts(mn, "mfence"))
      out.ops.push_back({K_MFENCE, -1});
    else if (locked || (starts(mn, "xchg") && (isMem(first) || isMem(dest)))) {
      // A locked instruction (xchg with memory is one) is a full fence on x86. Its own write is
      // not traced: say so unless it writes the stack (`lock; addl $0,(%rsp)`).
      out.ops.push_back({K_MFENCE, -1});
      if ((isProgramMem(dest) || isProgramMem(first)) && out.untraced.empty())
        out.untraced = ins;
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
        out.untraced = ins;
    }
  }
  return out;
}

// The address a flush in asm names: its operand (a memory operand's address, or a register
// operand holding the address), else the asm's first pointer operand, else its first i64 one.
Value *asmAddress(CallInst *CI, const AsmStmt &st, int operand, IRBuilder<> &B) {
  if (operand >= 0 && (size_t)operand < st.operands.size()) {
    if (Value *A = st.operands[operand].arg) {
      if (A->getType()->isPointerTy())
        return B.CreatePointerCast(A, B.getInt8PtrTy());
      if (A->getType()->isIntegerTy(64))
        return B.CreateIntToPtr(A, B.getInt8PtrTy());
    }
  }
  for (Value *A : CI->args())
    if (A->getType()->isPointerTy())
      return B.CreatePointerCast(A, B.getInt8PtrTy());
  for (Value *A : CI->args())
    if (A->getType()->isIntegerTy(64))
      return B.CreateIntToPtr(A, B.getInt8PtrTy());
  return nullptr;
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

void warnUntraced(Function &F, CallInst *CI, StringRef text) {
  std::string where = F.getName().str();
  if (DISubprogram *SP = F.getSubprogram())
    if (!SP->getName().empty())
      where = SP->getName().str();
  if (const DebugLoc &DL = CI->getDebugLoc())
    where += " (" + DL->getFilename().str() + ":" + std::to_string(DL.getLine()) + ":" +
             std::to_string(DL.getCol()) + ")";
  errs() << "pmsim trace cc: warning: inline asm not traced in " << where << ": " << quoted(text)
         << " writes memory the tracer does not see\n";
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
      bool traced = isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I) || isa<MemIntrinsic>(I) ||
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
  auto size = [&](Type *T) { return ConstantInt::get(Type::getInt64Ty(M.getContext()), DL.getTypeStoreSize(T)); };
  for (Instruction *I : work) {
    IRBuilder<> After(I->getNextNode());
    IRBuilder<> Before(I);
    if (auto *L = dyn_cast<LoadInst>(I)) {
      if (isStackSlot(L->getPointerOperand()))
        continue;
      Before.CreateCall(h.load, {Before.CreatePointerCast(L->getPointerOperand(), Before.getInt8PtrTy()),
                                 size(L->getType())});
    } else if (auto *S = dyn_cast<StoreInst>(I)) {
      if (isStackSlot(S->getPointerOperand()))
        continue;
      Value *P = After.CreatePointerCast(S->getPointerOperand(), After.getInt8PtrTy());
      Value *N = size(S->getValueOperand()->getType());
      if (S->isAtomic() && S->getOrdering() == AtomicOrdering::SequentiallyConsistent)
        After.CreateCall(h.rmw, {P, N}); // an xchg on x86
      else if (S->getMetadata(LLVMContext::MD_nontemporal))
        After.CreateCall(h.ntstore, {P, N});
      else
        After.CreateCall(h.store, {P, N});
    } else if (auto *R = dyn_cast<AtomicRMWInst>(I)) {
      After.CreateCall(h.rmw, {After.CreatePointerCast(R->getPointerOperand(), After.getInt8PtrTy()),
                               size(R->getValOperand()->getType())});
    } else if (auto *X = dyn_cast<AtomicCmpXchgInst>(I)) {
      After.CreateCall(h.rmw, {After.CreatePointerCast(X->getPointerOperand(), After.getInt8PtrTy()),
                               size(X->getNewValOperand()->getType())});
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
      auto *IA = dyn_cast<InlineAsm>(CI->getCalledOperand());
      if (!IA)
        continue;
      AsmStmt st = asmStmt(CI, IA);
      AsmText at = asmText(IA->getAsmString(), st, IA->getDialect() == InlineAsm::AD_Intel);
      if (!at.untraced.empty())
        warnUntraced(F, CI, IA->getAsmString());
      if (at.ops.empty())
        continue;
      for (const AsmOp &op : at.ops) {
        if (op.kind == K_SFENCE || op.kind == K_MFENCE) {
          After.CreateCall(h.fence, {After.getInt32(op.kind)});
        } else if (Value *A = asmAddress(CI, st, op.operand, After)) {
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

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "pmsim-trace", "0.1", [](PassBuilder &PB) {
            PB.registerOptimizerLastEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(PmTracePass()); });
          }};
}
