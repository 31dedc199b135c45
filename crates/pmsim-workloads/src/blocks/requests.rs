//! A request loop over a key distribution: the driver of the request-serving workloads
//! (memcached's SET/GET, N-Store's YCSB update/read, the Atlas structures' two operations).
//!
//! Every thread serves `ops` requests in the seeded interleaving of [`Interleaver`]. A request
//! is drawn as its kind (the primary kind with probability `primary_pct`), then its key, uniform
//! in `0..keys`, in that order (the order fixes the seeded stream); it then begins: the `begin`
//! marker with the kind's label, then the client work (`compute` instructions: parsing, hashing,
//! request generation) before the server touches any data. Serving it is the workload's own.

use crate::ctx::{Ctx, Gen, Interleaver};
use crate::params::Params;

/// A two-kind request mix.
pub struct Mix {
    /// Percent of requests of the primary kind.
    pub primary_pct: u64,
    /// Labels of the (primary, other) kinds.
    pub labels: [&'static str; 2],
    /// Keys are uniform in `0..keys`.
    pub keys: u64,
    /// Client work per request, in instructions.
    pub compute: u64,
}

/// One request, begun.
pub struct Request {
    pub primary: bool,
    pub key: u64,
    pub label: &'static str,
}

impl Mix {
    /// Serves `p.ops` requests per thread with `serve`, each drawn and begun as the module says.
    pub fn run(&self, g: &mut Gen, p: &Params, mut serve: impl FnMut(&mut Ctx<'_>, Request)) {
        Interleaver::run(g, p.threads, p.ops, |c, _| {
            let primary = c.rng().percent(self.primary_pct);
            let key = c.rng().below(self.keys);
            let label = self.labels[usize::from(!primary)];
            c.begin(label);
            c.compute(self.compute);
            serve(c, Request { primary, key, label });
        });
    }
}
