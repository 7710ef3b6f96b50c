//! A Myers diff (the linear-space, divide-and-conquer form of "An O(ND)
//! Difference Algorithm", 1986) over any slices of comparable items, with a
//! work budget instead of a deadline.
//!
//! Common prefixes and suffixes are matched first, in linear time; the rest
//! is split at the middle snake of its shortest edit script, recursively.
//! Every step of the search (one diagonal tried, one item compared) costs
//! one unit of the budget; when a part's search would exceed what is left,
//! that part is reported as all deleted then all inserted (a valid, if not
//! minimal, script). So the worst case — two long inputs with nothing in
//! common — costs at most the budget plus linear work, and the same inputs
//! always give the same script (no clock involved).

/// What an [`Edit`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `len` items the same in both.
    Equal,
    /// `len` items only in `a`.
    Delete,
    /// `len` items only in `b`.
    Insert,
}

/// A run of one [`Op`]: items `a..a + len` of `a` and/or `b..b + len` of
/// `b` (a delete does not move in `b`, an insert not in `a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edit {
    pub op: Op,
    pub a: usize,
    pub b: usize,
    pub len: usize,
}

/// Work units one alignment may spend searching (a few tens of
/// milliseconds at most): enough for an exact script of about 3,000 edits
/// between two long runs.
pub const WORK_BUDGET: u64 = 5_000_000;

/// The edit script from `a` to `b`, in order (see the module docs), with a
/// budget of [`WORK_BUDGET`].
pub fn diff<T: PartialEq>(a: &[T], b: &[T]) -> Vec<Edit> {
    let mut budget = WORK_BUDGET;
    diff_with_budget(a, b, &mut budget)
}

/// [`diff`] spending from `budget` (several diffs may share one), which is
/// left with what was not spent.
pub fn diff_with_budget<T: PartialEq>(a: &[T], b: &[T], budget: &mut u64) -> Vec<Edit> {
    let size = max_d(a.len(), b.len());
    let mut d = Differ { a, b, budget: *budget, out: Vec::new(), fwd: Diagonals::new(size), bwd: Diagonals::new(size) };
    d.conquer(0, a.len(), 0, b.len());
    *budget = d.budget;
    d.out
}

/// Longest search that can be needed: half the total length, plus one.
fn max_d(n: usize, m: usize) -> usize {
    (n + m).div_ceil(2) + 1
}

/// The furthest x reached on each diagonal `k` (from `-size` to `size`).
struct Diagonals {
    v: Vec<usize>,
    offset: isize,
}

impl Diagonals {
    fn new(size: usize) -> Self {
        Diagonals { v: vec![0; 2 * size + 1], offset: size as isize }
    }
}

impl std::ops::Index<isize> for Diagonals {
    type Output = usize;
    fn index(&self, k: isize) -> &usize {
        &self.v[(k + self.offset) as usize]
    }
}

impl std::ops::IndexMut<isize> for Diagonals {
    fn index_mut(&mut self, k: isize) -> &mut usize {
        &mut self.v[(k + self.offset) as usize]
    }
}

struct Differ<'s, T> {
    a: &'s [T],
    b: &'s [T],
    budget: u64,
    out: Vec<Edit>,
    fwd: Diagonals,
    bwd: Diagonals,
}

impl<T: PartialEq> Differ<'_, T> {
    fn push(&mut self, op: Op, a: usize, b: usize, len: usize) {
        if len == 0 {
            return;
        }
        if let Some(last) = self.out.last_mut() {
            let (end_a, end_b) = match last.op {
                Op::Equal => (last.a + last.len, last.b + last.len),
                Op::Delete => (last.a + last.len, last.b),
                Op::Insert => (last.a, last.b + last.len),
            };
            if last.op == op && (end_a, end_b) == (a, b) {
                last.len += len;
                return;
            }
        }
        self.out.push(Edit { op, a, b, len });
    }

    /// Items the same from the start of both ranges.
    fn prefix(&self, a: usize, a_end: usize, b: usize, b_end: usize) -> usize {
        self.a[a..a_end].iter().zip(&self.b[b..b_end]).take_while(|(x, y)| x == y).count()
    }

    /// Items the same from the end of both ranges.
    fn suffix(&self, a: usize, a_end: usize, b: usize, b_end: usize) -> usize {
        self.a[a..a_end].iter().rev().zip(self.b[b..b_end].iter().rev()).take_while(|(x, y)| x == y).count()
    }

    fn conquer(&mut self, mut a: usize, mut a_end: usize, mut b: usize, mut b_end: usize) {
        let head = self.prefix(a, a_end, b, b_end);
        self.push(Op::Equal, a, b, head);
        a += head;
        b += head;
        let tail = self.suffix(a, a_end, b, b_end);
        a_end -= tail;
        b_end -= tail;
        if a == a_end || b == b_end {
            self.push(Op::Delete, a, b, a_end - a);
            self.push(Op::Insert, a_end, b, b_end - b);
        } else if let Some((x, y)) = self.middle_snake(a, a_end, b, b_end) {
            self.conquer(a, x, b, y);
            self.conquer(x, a_end, y, b_end);
        } else {
            self.push(Op::Delete, a, b, a_end - a);
            self.push(Op::Insert, a_end, b, b_end - b);
        }
        self.push(Op::Equal, a_end, b_end, tail);
    }

    /// Spends `units` of the budget; false when there are not that many left.
    fn spend(&mut self, units: usize) -> bool {
        match self.budget.checked_sub(units as u64) {
            Some(left) => {
                self.budget = left;
                true
            }
            None => {
                self.budget = 0;
                false
            }
        }
    }

    /// Where to split the ranges: the start of the middle snake of a
    /// shortest edit script, searched from both ends at once. `None` when
    /// the budget runs out first.
    fn middle_snake(&mut self, a0: usize, a1: usize, b0: usize, b1: usize) -> Option<(usize, usize)> {
        let (n, m) = (a1 - a0, b1 - b0);
        let delta = n as isize - m as isize;
        let odd = delta & 1 == 1;
        self.fwd[1] = 0;
        self.bwd[1] = 0;
        for d in 0..max_d(n, m) as isize {
            if !self.spend(2 * d as usize + 1) {
                return None;
            }
            // Forward: the furthest-reaching d-path on each diagonal k = x - y.
            for k in (-d..=d).rev().step_by(2) {
                let mut x = if k == -d || (k != d && self.fwd[k - 1] < self.fwd[k + 1]) {
                    self.fwd[k + 1]
                } else {
                    self.fwd[k - 1] + 1
                };
                let y = (x as isize - k) as usize;
                let (x0, y0) = (x, y);
                if x < n && y < m {
                    let run = self.prefix(a0 + x, a1, b0 + y, b1);
                    if !self.spend(run) {
                        return None;
                    }
                    x += run;
                }
                self.fwd[k] = x;
                if odd && (k - delta).abs() < d && self.fwd[k] + self.bwd[-(k - delta)] >= n {
                    return Some((a0 + x0, b0 + y0));
                }
            }
            // Backward: the same from the ends, on diagonals counted from (n, m).
            for k in (-d..=d).rev().step_by(2) {
                let mut x = if k == -d || (k != d && self.bwd[k - 1] < self.bwd[k + 1]) {
                    self.bwd[k + 1]
                } else {
                    self.bwd[k - 1] + 1
                };
                let mut y = (x as isize - k) as usize;
                if x < n && y < m {
                    let run = self.suffix(a0, a1 - x, b0, b1 - y);
                    if !self.spend(run) {
                        return None;
                    }
                    x += run;
                    y += run;
                }
                self.bwd[k] = x;
                if !odd && (k - delta).abs() <= d && self.bwd[k] + self.fwd[-(k - delta)] >= n {
                    return Some((a0 + n - x, b0 + m - y));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Rebuilds `a` and `b` from the script, checking it walks both in order.
    fn replay(a: &[u8], b: &[u8], edits: &[Edit]) -> (Vec<u8>, Vec<u8>, usize) {
        let (mut ra, mut rb, mut equal) = (Vec::new(), Vec::new(), 0);
        for e in edits {
            assert_eq!((e.a, e.b), (ra.len(), rb.len()), "{edits:?}");
            match e.op {
                Op::Equal => {
                    assert_eq!(a[e.a..e.a + e.len], b[e.b..e.b + e.len]);
                    ra.extend_from_slice(&a[e.a..e.a + e.len]);
                    rb.extend_from_slice(&b[e.b..e.b + e.len]);
                    equal += e.len;
                }
                Op::Delete => ra.extend_from_slice(&a[e.a..e.a + e.len]),
                Op::Insert => rb.extend_from_slice(&b[e.b..e.b + e.len]),
            }
        }
        (ra, rb, equal)
    }

    /// Length of a longest common subsequence, the slow way.
    fn lcs(a: &[u8], b: &[u8]) -> usize {
        let mut row = vec![0; b.len() + 1];
        for x in a {
            let mut prev = 0;
            for (j, y) in b.iter().enumerate() {
                let keep = row[j + 1];
                row[j + 1] = if x == y { prev + 1 } else { row[j + 1].max(row[j]) };
                prev = keep;
            }
        }
        row[b.len()]
    }

    #[test]
    fn an_insertion_is_one_insert_between_equal_runs() {
        let edits = diff(b"abcdef", b"abcXdef");
        assert_eq!(
            edits,
            [
                Edit { op: Op::Equal, a: 0, b: 0, len: 3 },
                Edit { op: Op::Insert, a: 3, b: 3, len: 1 },
                Edit { op: Op::Equal, a: 3, b: 4, len: 3 },
            ]
        );
    }

    #[test]
    fn without_budget_the_middle_is_replaced_whole() {
        let edits = diff_with_budget(b"xabcy", b"xbcay", &mut 0);
        assert_eq!(
            edits,
            [
                Edit { op: Op::Equal, a: 0, b: 0, len: 1 },
                Edit { op: Op::Delete, a: 1, b: 1, len: 3 },
                Edit { op: Op::Insert, a: 4, b: 1, len: 3 },
                Edit { op: Op::Equal, a: 4, b: 4, len: 1 },
            ]
        );
    }

    #[test]
    fn ten_thousand_against_ten_thousand_different_items_stay_bounded() {
        let a: Vec<u32> = (0..10_000).collect();
        let b: Vec<u32> = (10_000..20_000).collect();
        let edits = diff(&a, &b);
        assert_eq!(edits.len(), 2);
        assert_eq!((edits[0].op, edits[0].len, edits[1].op, edits[1].len), (Op::Delete, 10_000, Op::Insert, 10_000));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn scripts_rebuild_both_inputs_and_are_shortest(
            a in proptest::collection::vec(0u8..4, 0..40),
            b in proptest::collection::vec(0u8..4, 0..40),
        ) {
            let edits = diff(&a, &b);
            let (ra, rb, equal) = replay(&a, &b, &edits);
            prop_assert_eq!(&ra, &a);
            prop_assert_eq!(&rb, &b);
            prop_assert_eq!(equal, lcs(&a, &b));
        }

        #[test]
        fn scripts_rebuild_both_inputs_on_any_budget(
            a in proptest::collection::vec(0u8..3, 0..30),
            b in proptest::collection::vec(0u8..3, 0..30),
            mut budget in 0u64..200,
        ) {
            let edits = diff_with_budget(&a, &b, &mut budget);
            let (ra, rb, _) = replay(&a, &b, &edits);
            prop_assert_eq!(ra, a);
            prop_assert_eq!(rb, b);
        }
    }
}
