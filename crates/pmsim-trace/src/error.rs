use std::fmt;

/// A problem with a trace, naming where it is: file and line for text traces, file and byte
/// offset for binary ones.
#[derive(Debug, thiserror::Error)]
pub struct TraceError {
    pub file: String,
    /// 1-based line for text traces; 0 when the problem has no line (binary, I/O).
    pub line: usize,
    pub msg: String,
}

impl TraceError {
    pub fn new(file: impl Into<String>, line: usize, msg: impl Into<String>) -> Self {
        TraceError { file: file.into(), line, msg: msg.into() }
    }
    pub fn io(file: &str, e: std::io::Error) -> Self {
        TraceError::new(file, 0, format!("cannot read or write: {e}"))
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file, self.line, self.msg)
        } else {
            write!(f, "{}: {}", self.file, self.msg)
        }
    }
}
