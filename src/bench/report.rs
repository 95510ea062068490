//! One plain-text table per scenario: distribution rows (p50/p90/p99/max/n)
//! aligned in columns, and labelled single values underneath. Formatting only;
//! the numbers come from `stats` and `probe`.

use super::stats::{Errors, Samples};
use std::fmt::Write as _;

enum Row {
    Dist { label: String, cells: [String; 5] },
    Value { label: String, value: String },
}

pub(crate) struct Table {
    title: String,
    rows: Vec<Row>,
}

impl Table {
    pub(crate) fn new(title: impl Into<String>) -> Table {
        Table { title: title.into(), rows: Vec::new() }
    }

    /// A latency distribution in milliseconds; `n/a` when nothing was recorded.
    pub(crate) fn dist(&mut self, label: impl Into<String>, samples: &Samples) {
        let cells = match samples.summary() {
            Some(s) => [ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), s.count.to_string()],
            None => ["n/a".into(), "n/a".into(), "n/a".into(), "n/a".into(), "0".into()],
        };
        self.rows.push(Row::Dist { label: label.into(), cells });
    }

    pub(crate) fn value(&mut self, label: impl Into<String>, value: impl Into<String>) {
        self.rows.push(Row::Value { label: label.into(), value: value.into() });
    }

    /// `errors` with the total, then one line per kind.
    pub(crate) fn errors(&mut self, errors: &Errors) {
        self.value("errors", errors.total().to_string());
        for (kind, n) in errors.iter() {
            self.value(format!("  {kind}"), n.to_string());
        }
    }

    pub(crate) fn render(&self) -> String {
        let label_width = self
            .rows
            .iter()
            .map(|r| match r {
                Row::Dist { label, .. } | Row::Value { label, .. } => label.chars().count(),
            })
            .max()
            .unwrap_or(0)
            .max(10);
        let mut widths = [3usize, 3, 3, 3, 1];
        for row in &self.rows {
            if let Row::Dist { cells, .. } = row {
                for (w, c) in widths.iter_mut().zip(cells) {
                    *w = (*w).max(c.len());
                }
            }
        }
        let mut out = String::new();
        let _ = writeln!(out, "== {} ==", self.title);
        let mut header_done = false;
        for row in &self.rows {
            match row {
                Row::Dist { label, cells } => {
                    if !header_done {
                        let names = ["p50", "p90", "p99", "max", "n"];
                        let _ = write!(out, "{:label_width$}", "latency (ms)");
                        for (w, n) in widths.iter().zip(names) {
                            let _ = write!(out, "  {n:>w$}");
                        }
                        out.push('\n');
                        header_done = true;
                    }
                    let _ = write!(out, "{label:label_width$}");
                    for (w, c) in widths.iter().zip(cells) {
                        let _ = write!(out, "  {c:>w$}");
                    }
                    out.push('\n');
                }
                Row::Value { label, value } => {
                    let _ = writeln!(out, "{label:label_width$}  {value}");
                }
            }
        }
        out
    }
}

fn ms(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

/// A number with a sensible number of decimals for the table.
pub(super) fn num(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_columns_line_up_under_their_header() {
        let mut s = Samples::default();
        for v in [1.0, 2.0, 250.0] {
            s.push(v);
        }
        let mut t = Table::new("demo");
        t.dist("a", &s);
        t.dist("much longer label", &Samples::default());
        t.value("throughput", "12.5 /s");
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "== demo ==");
        let header_end = lines[1].find("p50").map(|i| i + 3);
        assert_eq!(header_end, lines[2].find("2.0").map(|i| i + 3), "{text}");
        assert!(lines[3].contains("n/a"), "{text}");
        assert!(lines[4].starts_with("throughput"), "{text}");
        assert_eq!(lines[1].len(), lines[2].len(), "{text}");
    }
}
