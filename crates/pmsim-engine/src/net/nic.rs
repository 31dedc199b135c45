//! A NIC's message-processing pipeline in one direction: it starts one message (a posted work
//! request, a received packet, a persist ACK) every `net.nic_msg_ns` — the NIC's message rate —
//! and each takes `net.nic_ns` to pass through. Idle, a message pays only the latency; offered
//! faster than the rate, messages queue. The server's pipelines are shared by every client.

#[derive(Clone, Debug, Default)]
pub struct NicPipe {
    /// When the pipeline can start its next message.
    free_at: u64,
}

impl NicPipe {
    /// A message offered at `at` with initiation interval `occupancy`: returns when it starts.
    pub fn start(&mut self, at: u64, occupancy: u64) -> u64 {
        let s = at.max(self.free_at);
        self.free_at = s + occupancy;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_start_at_the_message_rate() {
        let mut n = NicPipe::default();
        assert_eq!(n.start(100, 30), 100);
        assert_eq!(n.start(100, 30), 130);
        assert_eq!(n.start(110, 30), 160);
        assert_eq!(n.start(1000, 30), 1000);
    }
}
