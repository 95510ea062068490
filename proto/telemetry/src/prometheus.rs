//! OpenTelemetry metrics rendered in the Prometheus text exposition format
//! (0.0.4), named as the OpenTelemetry-to-Prometheus compatibility rules say:
//! dots become underscores, the unit becomes a suffix (`s` → `_seconds`,
//! `By` → `_bytes`), and monotonic sums end in `_total`.

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use std::fmt::Write as _;

/// The Prometheus name of an OpenTelemetry instrument.
fn name(m: &Metric, monotonic_sum: bool) -> String {
    let mut out: String =
        m.name().chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' }).collect();
    let suffix = match m.unit() {
        "s" => "_seconds",
        "ms" => "_milliseconds",
        "By" => "_bytes",
        _ => "",
    };
    if !suffix.is_empty() && !out.ends_with(suffix) {
        out.push_str(suffix);
    }
    if monotonic_sum && !out.ends_with("_total") {
        out.push_str("_total");
    }
    out
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\n', "\\n").replace('"', "\\\"")
}

fn label_name(key: &str) -> String {
    key.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

/// `{a="1",b="2"}` (or nothing) from attributes plus `extra`.
fn labels<'a>(attributes: impl Iterator<Item = &'a KeyValue>, extra: Option<(&str, String)>) -> String {
    let mut parts: Vec<String> =
        attributes.map(|kv| format!("{}=\"{}\"", label_name(kv.key.as_str()), escape(&kv.value.to_string()))).collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() { String::new() } else { format!("{{{}}}", parts.join(",")) }
}

trait Number: Copy {
    fn text(self) -> String;
}

impl Number for f64 {
    fn text(self) -> String {
        if self.is_finite() {
            format!("{self}")
        } else if self.is_nan() {
            "NaN".into()
        } else if self > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    }
}

impl Number for u64 {
    fn text(self) -> String {
        self.to_string()
    }
}

impl Number for i64 {
    fn text(self) -> String {
        self.to_string()
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    if !help.is_empty() {
        let _ = writeln!(out, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
    }
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn metric<T: Number>(out: &mut String, m: &Metric, data: &MetricData<T>) {
    match data {
        MetricData::Gauge(g) => {
            let n = name(m, false);
            header(out, &n, m.description(), "gauge");
            for p in g.data_points() {
                let _ = writeln!(out, "{n}{} {}", labels(p.attributes(), None), p.value().text());
            }
        }
        MetricData::Sum(s) => {
            let n = name(m, s.is_monotonic());
            header(out, &n, m.description(), if s.is_monotonic() { "counter" } else { "gauge" });
            for p in s.data_points() {
                let _ = writeln!(out, "{n}{} {}", labels(p.attributes(), None), p.value().text());
            }
        }
        MetricData::Histogram(h) => {
            let n = name(m, false);
            header(out, &n, m.description(), "histogram");
            for p in h.data_points() {
                let mut cumulative = 0u64;
                for (bound, count) in p.bounds().zip(p.bucket_counts()) {
                    cumulative += count;
                    let le = Some(("le", bound.text()));
                    let _ = writeln!(out, "{n}_bucket{} {cumulative}", labels(p.attributes(), le));
                }
                let all = Some(("le", "+Inf".to_owned()));
                let _ = writeln!(out, "{n}_bucket{} {}", labels(p.attributes(), all), p.count());
                let _ = writeln!(out, "{n}_sum{} {}", labels(p.attributes(), None), p.sum().text());
                let _ = writeln!(out, "{n}_count{} {}", labels(p.attributes(), None), p.count());
            }
        }
        // Not used by Baton; left out rather than rendered wrongly.
        MetricData::ExponentialHistogram(_) => {}
    }
}

pub(crate) fn render(rm: &ResourceMetrics) -> String {
    let mut out = String::new();
    for scope in rm.scope_metrics() {
        for m in scope.metrics() {
            match m.data() {
                AggregatedMetrics::F64(d) => metric(&mut out, m, d),
                AggregatedMetrics::U64(d) => metric(&mut out, m, d),
                AggregatedMetrics::I64(d) => metric(&mut out, m, d),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::Metrics;
    use opentelemetry::KeyValue;

    #[test]
    fn instruments_render_with_prometheus_names_units_and_buckets() {
        let metrics = Metrics::install("test");
        let meter = crate::meter();
        let requests = meter.u64_counter("http.server.requests").with_description("Requests").build();
        requests.add(2, &[KeyValue::new("http.route", "/v1/{id}")]);
        let latency = meter.f64_histogram("http.server.request.duration").with_unit("s").build();
        latency.record(0.003, &[KeyValue::new("http.route", "/mcp")]);
        let backlog = meter.i64_up_down_counter("baton.backlog").build();
        backlog.add(-1, &[]);
        let text = metrics.render();
        assert!(text.contains("# TYPE http_server_requests_total counter"), "{text}");
        assert!(text.contains("http_server_requests_total{http_route=\"/v1/{id}\"} 2"), "{text}");
        assert!(text.contains("# TYPE http_server_request_duration_seconds histogram"), "{text}");
        assert!(
            text.contains("http_server_request_duration_seconds_bucket{http_route=\"/mcp\",le=\"+Inf\"} 1"),
            "{text}"
        );
        assert!(text.contains("http_server_request_duration_seconds_count{http_route=\"/mcp\"} 1"), "{text}");
        assert!(text.contains("baton_backlog -1"), "{text}");
    }
}
