//! The persistency models the checker knows (DESIGN.md §5–6).

use serde::Serialize;

/// A persistency model: epoch (EP), release (RP) or strict persistency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Model {
    Ep,
    Rp,
    Strict,
}

impl Model {
    pub const ALL: [Model; 3] = [Model::Ep, Model::Rp, Model::Strict];

    /// `"ep"`, `"rp"` or `"strict"`.
    pub fn from_name(s: &str) -> Option<Model> {
        match s {
            "ep" => Some(Model::Ep),
            "rp" => Some(Model::Rp),
            "strict" => Some(Model::Strict),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Model::Ep => "ep",
            Model::Rp => "rp",
            Model::Strict => "strict",
        }
    }

    /// Plain conflicting accesses (including loads) order persists across threads.
    pub(crate) fn conflicts(self) -> bool {
        !matches!(self, Model::Rp)
    }
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
