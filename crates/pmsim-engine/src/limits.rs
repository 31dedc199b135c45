//! Valid ranges of the machine's parameters, as data.
//!
//! Why: a range written once, next to the parameter (`config!` in `config.rs`), is what the
//! validator checks, what `pmsim config show` prints, and what `docs/config.md` and
//! `configs/asap-table2.toml` are generated from, so the four cannot drift. Ranges are checked
//! before the engine allocates anything sized by a parameter: the upper bounds keep every
//! table the machine builds small enough to allocate and every latency small enough that
//! simulated time (u64 picoseconds) cannot wrap inside one step.

use crate::config::ConfigError;

/// The valid values of one parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// An integer in `min..=max`.
    Int { min: u64, max: u64 },
    /// A power of two in `min..=max`.
    Pow2 { min: u64, max: u64 },
    /// A finite number in `min..=max` (`min` excluded when `open_min`).
    Float { min: f64, max: f64, open_min: bool },
    /// One of these names.
    Choice(&'static [&'static str]),
}

/// An integer in `min..=max`.
pub const fn int(min: u64, max: u64) -> Limit {
    Limit::Int { min, max }
}

/// A power of two in `min..=max`.
pub const fn pow2(min: u64, max: u64) -> Limit {
    Limit::Pow2 { min, max }
}

/// A finite number in `min..=max`.
pub const fn num(min: f64, max: f64) -> Limit {
    Limit::Float { min, max, open_min: false }
}

/// A finite number greater than `min`, at most `max`.
pub const fn above(min: f64, max: f64) -> Limit {
    Limit::Float { min, max, open_min: true }
}

/// One of these names.
pub const fn one_of(names: &'static [&'static str]) -> Limit {
    Limit::Choice(names)
}

/// Latencies: up to one simulated second each, so no single step can carry simulated time
/// past its end (`crate::sim::MAX_SIM_PS`).
pub const LATENCY_NS: Limit = num(0.0, 1e9);

/// A switch: `true` or `false` (TOML booleans; `--set x=true`).
pub const BOOL: Limit = Limit::Choice(&["true", "false"]);

/// What a parameter whose line names no range accepts: any value of its type (finite and
/// non-negative for numbers). Kept so a parameter added without a range still builds; the
/// test `every_parameter_declares_its_range` lists such parameters.
pub const UNDECLARED: Limit = Limit::Float { min: f64::NAN, max: f64::NAN, open_min: false };

fn fmt_num(x: f64) -> String {
    if x != 0.0 && (x.abs() >= 1e6 || x.abs() < 1e-3) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

impl Limit {
    /// The range in words, e.g. `1 to 64`, `a power of two from 64 to 2^40`, `lru | random`.
    pub fn describe(&self) -> String {
        match *self {
            Limit::Int { min, max } if max == u64::MAX => format!("integer >= {min}"),
            Limit::Int { min, max } => format!("{min} to {max}"),
            Limit::Pow2 { min, max } => format!("power of two, {min} to {max}"),
            Limit::Float { min, .. } if min.is_nan() => "any".to_string(),
            Limit::Float { min, max, open_min: true } => format!("> {} to {}", fmt_num(min), fmt_num(max)),
            Limit::Float { min, max, .. } => format!("{} to {}", fmt_num(min), fmt_num(max)),
            Limit::Choice(names) => names.join(" | "),
        }
    }

    pub(crate) fn err(&self, name: &str, got: impl std::fmt::Display) -> ConfigError {
        let what = match self {
            Limit::Choice(_) => format!("unknown value '{got}' (valid: {})", self.describe().replace(" | ", ", ")),
            _ => format!("must be {}, got {got}", self.describe()),
        };
        ConfigError::Param { name: name.to_string(), msg: what }
    }

    pub fn check_int(&self, name: &str, v: u64) -> Result<(), ConfigError> {
        match *self {
            Limit::Int { min, max } if !(min..=max).contains(&v) => Err(self.err(name, v)),
            Limit::Pow2 { min, max } if !(min..=max).contains(&v) || !v.is_power_of_two() => Err(self.err(name, v)),
            Limit::Float { min, .. } if !min.is_nan() => self.check_float(name, v as f64),
            Limit::Choice(_) => Err(self.err(name, v)),
            _ => Ok(()),
        }
    }

    pub fn check_float(&self, name: &str, v: f64) -> Result<(), ConfigError> {
        let ok = match *self {
            Limit::Float { min, .. } if min.is_nan() => v.is_finite() && v >= 0.0,
            Limit::Float { min, max, open_min } => {
                v.is_finite() && v <= max && if open_min { v > min } else { v >= min }
            }
            Limit::Int { min, max } => v.fract() == 0.0 && v >= min as f64 && v <= max as f64,
            Limit::Pow2 { .. } | Limit::Choice(_) => false,
        };
        if ok {
            Ok(())
        } else {
            Err(self.err(name, fmt_num(v)))
        }
    }

    pub fn check_str(&self, name: &str, v: &str) -> Result<(), ConfigError> {
        match self {
            Limit::Choice(names) if !names.contains(&v) => Err(self.err(name, v)),
            _ => Ok(()),
        }
    }
}

/// A parameter value the limit table can check.
pub trait Checked {
    fn check(&self, name: &str, limit: &Limit) -> Result<(), ConfigError>;
}

impl Checked for usize {
    fn check(&self, name: &str, limit: &Limit) -> Result<(), ConfigError> {
        limit.check_int(name, *self as u64)
    }
}

impl Checked for u64 {
    fn check(&self, name: &str, limit: &Limit) -> Result<(), ConfigError> {
        limit.check_int(name, *self)
    }
}

impl Checked for u32 {
    fn check(&self, name: &str, limit: &Limit) -> Result<(), ConfigError> {
        limit.check_int(name, *self as u64)
    }
}

impl Checked for f64 {
    fn check(&self, name: &str, limit: &Limit) -> Result<(), ConfigError> {
        limit.check_float(name, *self)
    }
}

impl Checked for bool {
    fn check(&self, _: &str, _: &Limit) -> Result<(), ConfigError> {
        Ok(())
    }
}

impl Checked for String {
    fn check(&self, name: &str, limit: &Limit) -> Result<(), ConfigError> {
        limit.check_str(name, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_accept_their_bounds_and_reject_beyond() {
        assert!(int(1, 64).check_int("x", 1).is_ok() && int(1, 64).check_int("x", 64).is_ok());
        assert!(int(1, 64).check_int("x", 0).is_err() && int(1, 64).check_int("x", 65).is_err());
        assert!(pow2(64, 4096).check_int("x", 128).is_ok() && pow2(64, 4096).check_int("x", 100).is_err());
        assert!(above(0.0, 10.0).check_float("x", 0.0).is_err() && above(0.0, 10.0).check_float("x", 1e-9).is_ok());
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e300] {
            assert!(LATENCY_NS.check_float("x", bad).is_err(), "{bad}");
        }
        let e = one_of(&["a", "b"]).check_str("p.q", "c").unwrap_err().to_string();
        assert_eq!(e, "parameter 'p.q': unknown value 'c' (valid: a, b)");
        let e = int(1, 4096).check_int("mc.wpq_entries", u64::MAX).unwrap_err().to_string();
        assert!(e.contains("mc.wpq_entries") && e.contains("1 to 4096"), "{e}");
    }
}
