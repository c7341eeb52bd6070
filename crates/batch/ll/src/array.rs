//! Job array specifications: the `-J "name[index_list]%limit"` of `bsub`.
//!
//! LSF makes a job an array when its name carries an index list in square
//! brackets: `name[1-100:2]`, `name[1,3,5-9]`, optionally followed by `%N`, the
//! most elements that may run at once. Each item of the list is `start`,
//! `start-end` or `start-end:step`, with positive integers; the elements are the
//! union of the items, each index at most once. Blanks around items are allowed
//! (LSF's own examples write `[1, 2, 3]`).
//!
//! The parser is pure and bounded: it checks the syntax without building the
//! index list (an array of a billion elements is described by a few ranges).
//! Which sizes a cluster accepts (`MAX_JOB_ARRAY_SIZE`) is mbatchd's decision:
//! it bounds [`ArraySpec::len`] first, and only then asks for the index list
//! ([`ArraySpec::indexes`]) or whether two items share an index
//! ([`ArraySpec::has_duplicate_indexes`]), which build it.

use std::fmt;

/// Most items (ranges) in one index list.
pub const ARRAY_RANGES_MAX: usize = 1024;

/// One item of an index list: `start[-end[:step]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexRange {
    /// First index, at least 1.
    pub start: u32,
    /// Last index asked for (the last element may be below it, by the step).
    pub end: u32,
    /// Increment, at least 1.
    pub step: u32,
}

impl IndexRange {
    /// The indexes of this item, in increasing order.
    pub fn indexes(self) -> impl Iterator<Item = u32> {
        (self.start..=self.end).step_by(self.step as usize)
    }

    /// How many indexes the item has.
    pub fn len(self) -> u32 {
        (self.end - self.start) / self.step + 1
    }

    /// Always false: an item has at least its start.
    pub fn is_empty(self) -> bool {
        false
    }

    /// The last index the item yields.
    pub fn last(self) -> u32 {
        self.start + (self.len() - 1) * self.step
    }
}

/// A parsed array specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    name: String,
    ranges: Vec<IndexRange>,
    running_max: Option<u32>,
}

/// Why a job name is not a valid array specification; the text is LSF's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    /// The brackets, an item, or the `%` limit is malformed, an index is 0, an
    /// end is below its start, or (found by mbatchd) two items share an index.
    #[error("Job array index error")]
    Index,
}

impl ArraySpec {
    /// Parses `job_name`: `None` for a name without `[` (not an array).
    pub fn parse(job_name: &str) -> Result<Option<ArraySpec>, ArrayError> {
        let Some(open) = job_name.find('[') else {
            return Ok(None);
        };
        let close = job_name.rfind(']').filter(|close| *close > open).ok_or(ArrayError::Index)?;
        let name = &job_name[..open];
        let list = &job_name[open + 1..close];
        let tail = &job_name[close + 1..];
        if name.contains(']') || list.contains(['[', ']']) {
            return Err(ArrayError::Index);
        }
        let running_max = match tail {
            "" => None,
            _ => Some(tail.strip_prefix('%').and_then(positive).ok_or(ArrayError::Index)?),
        };
        let items: Vec<&str> = list.split(',').collect();
        if items.len() > ARRAY_RANGES_MAX {
            return Err(ArrayError::Index);
        }
        let mut ranges = items.into_iter().map(parse_item).collect::<Result<Vec<_>, _>>()?;
        ranges.sort_unstable_by_key(|range| range.start);
        Ok(Some(ArraySpec { name: name.to_owned(), ranges, running_max }))
    }

    /// The array's name, without the index list.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The items of the index list, by start.
    pub fn ranges(&self) -> &[IndexRange] {
        &self.ranges
    }

    /// `%N`: the most elements that may run at once, `None` for no limit.
    pub fn running_max(&self) -> Option<u32> {
        self.running_max
    }

    /// How many indexes the items name together (an index two items share counts twice).
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|range| u64::from(range.len())).sum()
    }

    /// Always false: an index list has at least one item.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The highest index.
    pub fn max_index(&self) -> u32 {
        self.ranges.iter().map(|range| range.last()).max().unwrap_or(0)
    }

    /// Every index, in increasing order, each once. Builds a list of [`ArraySpec::len`]
    /// entries: bound that first.
    pub fn indexes(&self) -> Vec<u32> {
        let mut all: Vec<u32> = self.ranges.iter().flat_map(|range| range.indexes()).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Whether two items share an index (LSF wants each index once). Builds the
    /// index list, as [`ArraySpec::indexes`] does, but at most [`ArraySpec::max_index`] long.
    pub fn has_duplicate_indexes(&self) -> bool {
        // More indexes than the highest one: two must be equal, and the list
        // need not be built (it could be far larger than the array).
        if self.len() > u64::from(self.max_index()) {
            return true;
        }
        u64::try_from(self.indexes().len()).unwrap_or(u64::MAX) != self.len()
    }

    /// The name `bjobs` shows for element `index`: `name[index]`.
    pub fn element_name(&self, index: u32) -> String {
        format!("{}[{index}]", self.name)
    }
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.name)?;
        for (idx, range) in self.ranges.iter().enumerate() {
            let sep = if idx == 0 { "" } else { "," };
            match (range.start == range.end, range.step) {
                (true, _) => write!(f, "{sep}{}", range.start)?,
                (false, 1) => write!(f, "{sep}{}-{}", range.start, range.end)?,
                (false, step) => write!(f, "{sep}{}-{}:{step}", range.start, range.end)?,
            }
        }
        write!(f, "]")?;
        match self.running_max {
            Some(n) => write!(f, "%{n}"),
            None => Ok(()),
        }
    }
}

/// `%N` of `job_name` without parsing the rest: what dispatch asks for every
/// pending element, so it must cost little. `None` for no limit (or no array).
pub fn running_max_of(job_name: &str) -> Option<u32> {
    let close = job_name.rfind(']')?;
    job_name[close + 1..].strip_prefix('%').and_then(positive)
}

/// A positive decimal integer without sign or blanks around it.
fn positive(text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u32>().ok().filter(|n| *n > 0)
}

fn parse_item(item: &str) -> Result<IndexRange, ArrayError> {
    let (bounds, step) = match item.split_once(':') {
        Some((bounds, step)) => (bounds, positive(step).ok_or(ArrayError::Index)?),
        None => (item, 1),
    };
    let (start, end) = match bounds.split_once('-') {
        Some((start, end)) => (positive(start), positive(end)),
        None if item.contains(':') => return Err(ArrayError::Index),
        None => (positive(bounds), positive(bounds)),
    };
    match (start, end) {
        (Some(start), Some(end)) if start <= end => Ok(IndexRange { start, end, step }),
        _ => Err(ArrayError::Index),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn indexes(name: &str) -> Vec<u32> {
        ArraySpec::parse(name).expect("valid").expect("an array").indexes()
    }

    // Goal: every form LSF documents parses to the indexes it means.
    #[test]
    fn lsf_forms_parse() {
        assert_eq!(indexes("a[1-5]"), vec![1, 2, 3, 4, 5]);
        assert_eq!(indexes("a[1-10:2]"), vec![1, 3, 5, 7, 9]);
        assert_eq!(indexes("a[1, 3,5-7]"), vec![1, 3, 5, 6, 7]);
        assert_eq!(indexes("[4]"), vec![4]);
        assert_eq!(indexes("a[7,1-3]"), vec![1, 2, 3, 7]);
        let spec = ArraySpec::parse("name[1-100:2]%5").expect("valid").expect("array");
        assert_eq!(
            (spec.name(), spec.len(), spec.max_index(), spec.running_max()),
            ("name", 50, 99, Some(5))
        );
        assert_eq!(spec.to_string(), "name[1-100:2]%5");
        assert_eq!(spec.element_name(3), "name[3]");
        assert_eq!(ArraySpec::parse("plain"), Ok(None));
    }

    // Goal: malformed specifications are refused with LSF's message.
    #[test]
    fn malformed_specs_are_refused() {
        for bad in [
            "a[",
            "a[]",
            "a[0]",
            "a[0-3]",
            "a[5-1]",
            "a[1-3:0]",
            "a[1:2]",
            "a[x]",
            "a[1-]",
            "a[-3]",
            "a[1-3]%0",
            "a[1-3]%",
            "a[1-3]%x",
            "a[1-3]x",
            "a[1-3][4]",
            "a[[1]]",
            "a[1,,2]",
            "a[+1]",
            "a[99999999999]",
        ] {
            assert_eq!(ArraySpec::parse(bad), Err(ArrayError::Index), "{bad}");
        }
        assert_eq!(ArrayError::Index.to_string(), "Job array index error");
    }

    // Goal: items sharing an index are found, also when they are not neighbours
    // and when steps interleave without sharing.
    #[test]
    fn duplicate_indexes_are_found() {
        let dup = |name: &str| ArraySpec::parse(name).expect("valid").expect("array").has_duplicate_indexes();
        assert!(dup("a[1-3,2]"));
        assert!(dup("a[1-100:3,2,4]"));
        assert!(!dup("a[1-9:2,2-10:2]"));
        assert_eq!(indexes("a[1-9:2,2-10:2]"), (1..=10).collect::<Vec<_>>());
    }

    // Goal: `running_max_of` agrees with the full parser on valid specs.
    #[test]
    fn running_max_shortcut_agrees() {
        assert_eq!(running_max_of("a[1-6]%2"), Some(2));
        assert_eq!(running_max_of("a[1-6]"), None);
        assert_eq!(running_max_of("plain"), None);
    }

    proptest! {
        // Goal: no input makes the parser panic, and whatever it accepts has
        // indexes that are positive, strictly increasing and as many as `len`.
        #[test]
        fn parser_is_total_and_consistent(name in "[a-z]{0,3}(\\[[0-9,:% -]{0,12}\\](%[0-9]{0,3})?)?") {
            if let Ok(Some(spec)) = ArraySpec::parse(&name) {
                if spec.len() <= 100_000 {
                    let all = spec.indexes();
                    prop_assert!(all.iter().all(|i| *i > 0));
                    prop_assert!(all.windows(2).all(|w| w[0] < w[1]));
                    prop_assert_eq!(all.len() as u64 == spec.len(), !spec.has_duplicate_indexes());
                    prop_assert_eq!(all.last().copied(), Some(spec.max_index()));
                }
                prop_assert_eq!(running_max_of(&name), spec.running_max());
            }
        }

        // Goal: arbitrary text never panics the parser.
        #[test]
        fn arbitrary_text_never_panics(name in ".{0,40}") {
            let _ = ArraySpec::parse(&name);
            let _ = running_max_of(&name);
        }
    }
}
