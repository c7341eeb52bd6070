//! Reading the lim commands' output in tests: this machine's static facts as `lshosts`
//! prints them, and the line of one host.

/// This machine's `ncpus`, `maxmem` and `maxswp` as lshosts prints them, read here from
/// /proc (every test host runs on this machine).
pub fn this_machine_facts() -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("read /proc/cpuinfo");
    let ncpus = cpuinfo
        .lines()
        .filter(|line| line.split(':').next().is_some_and(|key| key.trim() == "processor"))
        .count();
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("read /proc/meminfo");
    let mb = |key: &str| -> f32 {
        let kb: f64 = meminfo
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/meminfo"));
        (kb / 1024.0) as u32 as f32
    };
    let format = lava_commands::lim::format_load_value;
    vec![ncpus.to_string(), format(10, mb("MemTotal:")), format(9, mb("SwapTotal:"))]
}

/// The `ncpus`, `maxmem` and `maxswp` columns of an lshosts line.
pub fn lshosts_facts(line: &str) -> Option<Vec<String>> {
    let fields: Vec<String> = line.split_whitespace().skip(4).take(3).map(str::to_owned).collect();
    (fields.len() == 3).then_some(fields)
}

/// The line of `host` (its first column) in a command's output.
pub fn host_line(out: &str, host: &str) -> Option<String> {
    out.lines().find(|line| line.split_whitespace().next() == Some(host)).map(str::to_owned)
}
