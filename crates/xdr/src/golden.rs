//! Golden-bytes test support for the wire crates (feature `golden`, for their tests only): a
//! golden is a hex literal with one field per line, `#` starting a comment, and
//! [`assert_bytes`] names the first byte and the golden line that differ, so that a changed
//! field shows by name. It never runs in a daemon.

/// The bytes of a golden literal: one field per line, `#` starts a comment, and spaces (which
/// separate a length, its bytes and their padding) are ignored.
pub fn unhex(golden: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (line_idx, line) in golden.lines().enumerate() {
        let code = line.split_once('#').map_or(line, |(code, _comment)| code);
        let digits: Vec<u8> = code.bytes().filter(|byte| !byte.is_ascii_whitespace()).collect();
        assert!(
            digits.len().is_multiple_of(2),
            "golden line {}: odd number of hex digits: {line}",
            line_idx + 1
        );
        for pair in digits.chunks(2) {
            let text = std::str::from_utf8(pair).expect("hex digits are ASCII");
            let byte = u8::from_str_radix(text, 16)
                .unwrap_or_else(|_| panic!("golden line {}: `{text}` is not hex: {line}", line_idx + 1));
            bytes.push(byte);
        }
    }
    bytes
}

/// `bytes` as hex, four bytes to a group, after a label, for failure messages.
fn dump(label: &str, bytes: &[u8]) -> String {
    let groups: Vec<String> =
        bytes.chunks(4).map(|word| word.iter().map(|b| format!("{b:02x}")).collect()).collect();
    format!("  {label} ({} bytes): {}", bytes.len(), groups.join(" "))
}

/// The line of a golden literal that holds byte `offset`, to name the field that changed.
fn golden_line_at(golden: &str, offset: usize) -> &str {
    let mut end = 0;
    for line in golden.lines() {
        end += unhex(line).len();
        if offset < end {
            return line.trim();
        }
    }
    "(past the end of the golden)"
}

/// Fails, naming the message, the first byte that differs and the golden's line for it, unless
/// `actual` is the golden.
pub fn assert_bytes(name: &str, actual: &[u8], golden: &str) {
    let expected = unhex(golden);
    if actual != expected {
        let at = actual
            .iter()
            .zip(&expected)
            .position(|(a, g)| a != g)
            .unwrap_or(actual.len().min(expected.len()));
        let line = golden_line_at(golden, at);
        panic!(
            "{name}: the wire changed at byte {at}, in golden line `{line}`\n{}\n{}",
            dump("actual", actual),
            dump("golden", &expected)
        );
    }
}
