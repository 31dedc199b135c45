//! The persistency models the checker knows (docs/design.md §5–6).

use serde::Serialize;

/// A persistency model: epoch (EP), release (RP), strict persistency, or x86 (Px86) for traces
/// of legacy programs that flush and fence themselves (see `x86.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Model {
    Ep,
    Rp,
    Strict,
    X86,
}

impl Model {
    pub const ALL: [Model; 3] = [Model::Ep, Model::Rp, Model::Strict];

    /// `"ep"`, `"rp"`, `"strict"` or `"x86"`.
    pub fn from_name(s: &str) -> Option<Model> {
        match s {
            "ep" => Some(Model::Ep),
            "rp" => Some(Model::Rp),
            "strict" => Some(Model::Strict),
            "x86" => Some(Model::X86),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Model::Ep => "ep",
            Model::Rp => "rp",
            Model::Strict => "strict",
            Model::X86 => "x86",
        }
    }

    /// Plain conflicting accesses (including loads) order persists across threads.
    pub(crate) fn conflicts(self) -> bool {
        !matches!(self, Model::Rp | Model::X86)
    }
}

/// How an EP/RP/strict check reads a trace's `sfence`/`mfence` (docs/design.md §3). Under
/// [`Model::X86`] fences are x86 fence points whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FenceReading {
    /// As barriers only in a legacy x86 trace (`pmsim_trace::Dialect::X86`); a trace that also
    /// has `ofence`/`dfence`/`strand` is design-neutral and its `sfence`s order nothing, as
    /// under a design that runs them literally (the baseline).
    #[default]
    ByDialect,
    /// As barriers in every trace, durable ones after a flush or a non-temporal PM store: for a
    /// design that maps x86 fences so (HOPS, ASAP, delegated, BROI), which must keep the
    /// mapping's promise in a mixed trace too.
    Mapped,
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
