//! Plain-text tables for people: a header row, columns padded to their widest
//! cell, two spaces between them; the last column is not padded. Cells are
//! single-line (control characters become spaces), so one row is one line
//! whatever a user id or tool name holds.

pub(crate) fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let clean = |s: &str| s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>();
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| clean(c)).collect()).collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            out.push_str(cell);
            if i < last {
                out.push_str(&" ".repeat(w - cell.chars().count() + 2));
            }
        }
        out.trim_end().to_owned()
    };
    let mut lines = vec![line(headers.to_vec())];
    lines.extend(rows.iter().map(|r| line(r.iter().map(String::as_str).collect())));
    lines.join("\n")
}

/// `-` for an absent value, so a column never looks shifted.
pub(crate) fn or_dash(v: Option<&str>) -> String {
    match v {
        Some(s) if !s.is_empty() => s.to_owned(),
        _ => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_cells_stay_on_one_line() {
        let rows = vec![vec!["te_1".into(), "a\nb".into(), "x".into()], vec!["te_22".into(), "c".into(), "".into()]];
        let text = render(&["ID", "USER", "NOTE"], &rows);
        assert_eq!(text, "ID     USER  NOTE\nte_1   a b   x\nte_22  c");
    }
}
