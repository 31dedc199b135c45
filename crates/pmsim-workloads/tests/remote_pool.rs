//! The N-Store pool of `rdma-ycsb` holds its whole table: the load's freed log entries leave
//! holes the allocator's next-fit search passes by, and the pool was once sized without them
//! ("N-Store pool ... is full" from 65536 tuples per client, inside the parameter's range).

use std::collections::BTreeMap;

#[test]
fn rdma_ycsb_loads_large_tables() {
    for (tuples, threads) in [("65536", "1"), ("262144", "2")] {
        let p: BTreeMap<String, String> = [("tuples", tuples), ("threads", threads), ("ops", "2")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let g = pmsim_workloads::generate("rdma-ycsb", &p).unwrap_or_else(|e| panic!("tuples={tuples}: {e}"));
        assert!(g.trace.num_events() > 0, "tuples={tuples}");
    }
}
