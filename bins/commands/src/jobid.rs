//! Job references on command lines: `ID`, `"ID[INDEX]"`, and `0` for "all my
//! jobs", with LSF's messages for what is not one (cmd.jobid.c in Lava:
//! `12x: Illegal job ID.`, `12[1-5]: Illegal job array index. One element only.`).

use lava_batch_wire::WireJobRef;

/// What a job operand names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobTarget {
    /// `0`: every unfinished job of the user (`bkill 0`), or no restriction (`bjobs 0`).
    All,
    /// One job, or one element of an array.
    Job(WireJobRef),
}

/// Parses one job operand.
pub fn parse(text: &str) -> Result<JobTarget, String> {
    let illegal = || format!("{text}: Illegal job ID.");
    let (id_text, index_text) = match text.split_once('[') {
        None => (text, None),
        Some((id, rest)) => {
            let index = rest.strip_suffix(']').ok_or_else(|| format!("{text}: Bad job array index list."))?;
            (id, Some(index))
        }
    };
    if id_text.is_empty() || !id_text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(illegal());
    }
    let job_id: u32 = id_text.parse().map_err(|_| format!("{text}: Job ID out of valid range."))?;
    let Some(index_text) = index_text else {
        return Ok(if job_id == 0 {
            JobTarget::All
        } else {
            JobTarget::Job(WireJobRef { job_id, array_index: 0 })
        });
    };
    if job_id == 0 {
        return Err(format!("{text}: Job ID out of valid range."));
    }
    if index_text.is_empty() || !index_text.bytes().all(|b| b.is_ascii_digit()) {
        let one_element = index_text.contains(['-', ',', ':']);
        return Err(if one_element {
            format!("{text}: Illegal job array index. One element only.")
        } else {
            format!("{text}: Bad job array index list.")
        });
    }
    match index_text.parse::<u32>() {
        Ok(array_index) if array_index > 0 => Ok(JobTarget::Job(WireJobRef { job_id, array_index })),
        _ => Err(format!("{text}: Job Array index out of valid range.")),
    }
}

/// How LSF prints a job reference (`lsb_jobid2str`): `12` or `12[3]`.
pub fn display(job: WireJobRef) -> String {
    if job.array_index == 0 { job.job_id.to_string() } else { format!("{}[{}]", job.job_id, job.array_index) }
}

/// Parses every operand: the jobs in order without repeats, and whether `0` was among them.
pub fn parse_all(operands: &[String]) -> Result<(Vec<WireJobRef>, bool), String> {
    let mut jobs = Vec::new();
    let mut all = false;
    for operand in operands {
        match parse(operand)? {
            JobTarget::All => all = true,
            JobTarget::Job(job) if !jobs.contains(&job) => jobs.push(job),
            JobTarget::Job(_) => {}
        }
    }
    Ok((jobs, all))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(job_id: u32, array_index: u32) -> Result<JobTarget, String> {
        Ok(JobTarget::Job(WireJobRef { job_id, array_index }))
    }

    // Goal: every accepted shape, and LSF's message for each refused one.
    #[test]
    fn job_operands_parse_with_lsf_messages() {
        assert_eq!(parse("12"), job(12, 0));
        assert_eq!(parse("12[3]"), job(12, 3));
        assert_eq!(parse("0"), Ok(JobTarget::All));
        assert_eq!(parse("12x"), Err("12x: Illegal job ID.".to_owned()));
        assert_eq!(parse("-3"), Err("-3: Illegal job ID.".to_owned()));
        assert_eq!(parse(""), Err(": Illegal job ID.".to_owned()));
        assert_eq!(parse("99999999999"), Err("99999999999: Job ID out of valid range.".to_owned()));
        assert_eq!(parse("12[1-5]"), Err("12[1-5]: Illegal job array index. One element only.".to_owned()));
        assert_eq!(parse("12[x]"), Err("12[x]: Bad job array index list.".to_owned()));
        assert_eq!(parse("12[3"), Err("12[3: Bad job array index list.".to_owned()));
        assert_eq!(parse("12[0]"), Err("12[0]: Job Array index out of valid range.".to_owned()));
        assert_eq!(parse("0[1]"), Err("0[1]: Job ID out of valid range.".to_owned()));
    }

    // Goal: repeats collapse, `0` is remembered, display round-trips.
    #[test]
    fn operand_lists_deduplicate_and_display() {
        let operands: Vec<String> = ["5", "5", "0", "6[2]"].iter().map(|s| s.to_string()).collect();
        let (jobs, all) = parse_all(&operands).expect("valid");
        assert!(all);
        assert_eq!(jobs.iter().map(|j| display(*j)).collect::<Vec<_>>(), ["5", "6[2]"]);
    }
}
