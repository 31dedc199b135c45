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

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
