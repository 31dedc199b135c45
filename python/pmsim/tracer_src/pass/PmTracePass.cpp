// pmsim tracer: the LLVM pass plugin.
//
// Why it exists: neither sanitizer runtimes, Valgrind nor QEMU see what a persistent-memory
// program does (inline-asm flushes, CLWB/CLFLUSHOPT, store values). This pass instruments the
// optimised IR (it runs at the end of the optimisation pipeline, like TSan, so it traces the
// accesses the program really performs) with calls into the runtime (`pmtrace_rt.c`):
//   loads and stores (the runtime reads the stored value back), atomicrmw / cmpxchg / seq_cst
//   atomic stores (-> rmw), seq_cst fences (-> mfence), llvm.memcpy/memmove/memset, the x86
//   flush and fence intrinsics, and inline asm recognised by its text (clflush, clflushopt,
//   clwb, sfence, mfence, and the old spellings `.byte 0x66; clflush` = CLFLUSHOPT and
//   `.byte 0x66; xsaveopt` = CLWB).
// What it guarantees: every instrumented access becomes exactly one runtime call, issued in the
// thread's program order after the access (before it for loads). Accesses whose address is
// a stack slot of the current function (an alloca that never escapes the IR we see) are left
// out: they are never persistent memory.
// The work between accesses is counted too, so a traced program is timed with its computation
// and not as if only its memory accesses took time: each basic block adds its number of
// non-memory instructions to a thread-local counter (`__pmt_icount`), which the runtime turns
// into a `compute N` event before the thread's next event. Optimised IR instructions stand in
// for machine instructions (x86 folds some into addressing modes and splits others); PHIs,
// debug and lifetime markers and no-op casts count nothing, and the traced accesses count
// nothing here because the simulator times them itself.

#include "llvm/Analysis/ValueTracking.h"
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

#include <string>
#include <vector>

using namespace llvm;

namespace {

// Kind codes shared with the runtime and the binary trace format (docs/binary-trace.md).
enum : unsigned { K_CLWB = 5, K_CLFLUSHOPT = 6, K_CLFLUSH = 7, K_SFENCE = 8, K_MFENCE = 9 };

struct Hooks {
  FunctionCallee load, store, ntstore, rmw, memop, flush, fence;
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

// The persist-relevant instructions of one inline-asm text, in order.
std::vector<unsigned> asmOps(StringRef text) {
  std::string t = lower(text);
  // Split into instructions at ';' and newlines; a `.byte 0x66` prefix applies to the next one.
  std::vector<unsigned> ops;
  bool prefix66 = false;
  size_t i = 0;
  while (i <= t.size()) {
    size_t j = t.find_first_of(";\n", i);
    if (j == std::string::npos)
      j = t.size();
    std::string ins = t.substr(i, j - i);
    size_t b = ins.find_first_not_of(" \t");
    ins = b == std::string::npos ? "" : ins.substr(b);
    auto starts = [&](const char *w) { return ins.rfind(w, 0) == 0; };
    if (starts(".byte")) {
      prefix66 = ins.find("0x66") != std::string::npos;
    } else if (!ins.empty()) {
      if (starts("clflushopt"))
        ops.push_back(K_CLFLUSHOPT);
      else if (starts("clflush"))
        ops.push_back(prefix66 ? K_CLFLUSHOPT : K_CLFLUSH);
      else if (starts("clwb"))
        ops.push_back(K_CLWB);
      else if (starts("xsaveopt") && prefix66)
        ops.push_back(K_CLWB);
      else if (starts("sfence"))
        ops.push_back(K_SFENCE);
      else if (starts("mfence"))
        ops.push_back(K_MFENCE);
      prefix66 = false;
    }
    i = j + 1;
  }
  return ops;
}

Value *asmAddress(CallInst *CI, IRBuilder<> &B) {
  for (Value *A : CI->args())
    if (A->getType()->isPointerTy())
      return B.CreatePointerCast(A, B.getInt8PtrTy());
  for (Value *A : CI->args())
    if (A->getType()->isIntegerTy(64))
      return B.CreateIntToPtr(A, B.getInt8PtrTy());
  return nullptr;
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
      bool traced = isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I) || isa<MemIntrinsic>(I) ||
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
      std::vector<unsigned> ops = asmOps(IA->getAsmString());
      if (ops.empty())
        continue;
      for (unsigned k : ops) {
        if (k == K_SFENCE || k == K_MFENCE) {
          After.CreateCall(h.fence, {After.getInt32(k)});
        } else if (Value *A = asmAddress(CI, After)) {
          After.CreateCall(h.flush, {After.getInt32(k), A});
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
