//! `process_resident_memory_bytes`, read from /proc at each scrape under the name every
//! Prometheus client library gives it, so that the usual dashboards and queries find it.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug)]
pub struct ResidentMemory;

impl Collector for ResidentMemory {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Not on Linux, or /proc unreadable: no sample rather than a wrong one.
        let Some(bytes) = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| resident_bytes(&status))
        else {
            return Ok(());
        };
        let metric = encoder.encode_descriptor(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::try_from(bytes).unwrap_or(i64::MAX)).encode(metric)
    }
}

/// `VmRSS` of /proc/<pid>/status (in kB there), in bytes.
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    (words.next()? == "kB").then_some(value * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_vmrss_in_bytes() {
        let status = "Name:\tflotilla\nVmPeak:\t  999 kB\nVmRSS:\t   20480 kB\nThreads:\t9\n";
        assert_eq!(resident_bytes(status), Some(20 * 1024 * 1024));
        assert_eq!(resident_bytes("Name:\tflotilla\n"), None);
        assert_eq!(resident_bytes("VmRSS:\t20 MB\n"), None);
    }
}
