//! Aligning two sequences (steps, messages, the calls of a step) into rows,
//! in three passes:
//!
//! 1. a diff over each item's exact key (for a step: its calls' tools and
//!    arguments and whether it has text), so an inserted item is one row
//!    and the items after it line up again;
//! 2. in each gap between equal runs, a diff over a looser key (the tools'
//!    names alone), so a step whose arguments changed pairs with its
//!    counterpart instead of showing as deleted and inserted;
//! 3. what is still unpaired in a gap pairs by position (the items that
//!    took each other's place), the surplus of the longer side staying
//!    deleted or inserted.
//!
//! A folded prefix (the history a fork shares) pairs item by item first.
//! Both diff passes of one alignment share one work budget (see
//! [`super::diff`]): past it, what is left pairs by position.

use super::diff::{diff_with_budget, Op, WORK_BUDGET};

/// One row: an item of `a`, of `b`, or one of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub a: Option<usize>,
    pub b: Option<usize>,
}

/// The keys one side is aligned by (see the module docs).
pub struct Keys<'k> {
    pub exact: &'k [u64],
    pub loose: &'k [u64],
}

/// The rows of `a` and `b`: every item of each exactly once, in order.
/// The first `fold` items of both pair by position (`fold` is at most the
/// shorter length).
pub fn align(a: Keys<'_>, b: Keys<'_>, fold: usize) -> Vec<Row> {
    let (n, m) = (a.exact.len(), b.exact.len());
    let fold = fold.min(n).min(m);
    let mut rows: Vec<Row> = (0..fold).map(|i| Row { a: Some(i), b: Some(i) }).collect();
    rows.reserve(n.max(m) - fold);
    // One budget for both passes: the worst case costs one budget, not one per gap.
    let mut budget = WORK_BUDGET;
    let (mut ga, mut gb) = (fold, fold);
    for e in diff_with_budget(&a.exact[fold..], &b.exact[fold..], &mut budget) {
        if e.op != Op::Equal {
            continue;
        }
        let (ea, eb) = (e.a + fold, e.b + fold);
        gap(&mut rows, &a.loose[ga..ea], &b.loose[gb..eb], (ga, gb), &mut budget);
        rows.extend((0..e.len).map(|i| Row { a: Some(ea + i), b: Some(eb + i) }));
        (ga, gb) = (ea + e.len, eb + e.len);
    }
    gap(&mut rows, &a.loose[ga..], &b.loose[gb..], (ga, gb), &mut budget);
    rows
}

/// Passes 2 and 3 over one gap: items `a0..` of `a` and `b0..` of `b`.
fn gap(rows: &mut Vec<Row>, a: &[u64], b: &[u64], (a0, b0): (usize, usize), budget: &mut u64) {
    if a.is_empty() || b.is_empty() {
        rows.extend((0..a.len()).map(|i| Row { a: Some(a0 + i), b: None }));
        rows.extend((0..b.len()).map(|j| Row { a: None, b: Some(b0 + j) }));
        return;
    }
    let (mut ga, mut gb) = (0, 0);
    for e in diff_with_budget(a, b, budget) {
        if e.op != Op::Equal {
            continue;
        }
        by_position(rows, a0 + ga..a0 + e.a, b0 + gb..b0 + e.b);
        rows.extend((0..e.len).map(|i| Row { a: Some(a0 + e.a + i), b: Some(b0 + e.b + i) }));
        (ga, gb) = (e.a + e.len, e.b + e.len);
    }
    by_position(rows, a0 + ga..a0 + a.len(), b0 + gb..b0 + b.len());
}

/// Pass 3: pairs by position, then the rest of the longer side alone.
fn by_position(rows: &mut Vec<Row>, a: std::ops::Range<usize>, b: std::ops::Range<usize>) {
    let paired = a.len().min(b.len());
    rows.extend((0..paired).map(|i| Row { a: Some(a.start + i), b: Some(b.start + i) }));
    rows.extend((a.start + paired..a.end).map(|i| Row { a: Some(i), b: None }));
    rows.extend((b.start + paired..b.end).map(|j| Row { a: None, b: Some(j) }));
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn rows(a: &[u64], al: &[u64], b: &[u64], bl: &[u64], fold: usize) -> Vec<(Option<usize>, Option<usize>)> {
        let keys = |exact, loose| Keys { exact, loose };
        align(keys(a, al), keys(b, bl), fold).into_iter().map(|r| (r.a, r.b)).collect()
    }

    #[test]
    fn an_inserted_item_is_one_row_and_the_rest_realigns() {
        let got = rows(&[1, 2, 3, 4], &[1, 2, 3, 4], &[1, 2, 9, 3, 4], &[1, 2, 9, 3, 4], 0);
        assert_eq!(
            got,
            [(Some(0), Some(0)), (Some(1), Some(1)), (None, Some(2)), (Some(2), Some(3)), (Some(3), Some(4))]
        );
    }

    #[test]
    fn a_changed_item_pairs_by_its_loose_key_and_extras_stay_alone() {
        // b changed item 1 (same loose key 20) and inserted 30 before it.
        let got = rows(&[1, 2, 3], &[10, 20, 30], &[1, 7, 8, 3], &[10, 30, 20, 30], 0);
        assert_eq!(got, [(Some(0), Some(0)), (None, Some(1)), (Some(1), Some(2)), (Some(2), Some(3))]);
        // Nothing alike: pairs by position, the surplus alone.
        let got = rows(&[1, 2], &[1, 2], &[5, 6, 7], &[5, 6, 7], 0);
        assert_eq!(got, [(Some(0), Some(0)), (Some(1), Some(1)), (None, Some(2))]);
    }

    #[test]
    fn a_folded_prefix_pairs_item_by_item() {
        let got = rows(&[1, 2, 3], &[1, 2, 3], &[1, 3], &[1, 3], 1);
        assert_eq!(got, [(Some(0), Some(0)), (Some(1), None), (Some(2), Some(1))]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn rows_cover_every_item_of_both_exactly_once_in_order(
            a in proptest::collection::vec(0u64..6, 0..30),
            b in proptest::collection::vec(0u64..6, 0..30),
            fold in 0usize..5,
        ) {
            let (al, bl): (Vec<u64>, Vec<u64>) = (a.iter().map(|k| k % 3).collect(), b.iter().map(|k| k % 3).collect());
            let got = rows(&a, &al, &b, &bl, fold);
            let sides: Vec<usize> = got.iter().filter_map(|r| r.0).collect();
            prop_assert_eq!(sides, (0..a.len()).collect::<Vec<_>>());
            let sides: Vec<usize> = got.iter().filter_map(|r| r.1).collect();
            prop_assert_eq!(sides, (0..b.len()).collect::<Vec<_>>());
            prop_assert!(got.iter().all(|r| r.0.is_some() || r.1.is_some()));
            // Equal keys in the same place pair: identical inputs give only pairs.
            let same = rows(&a, &al, &a, &al, fold);
            prop_assert!(same.iter().enumerate().all(|(i, r)| *r == (Some(i), Some(i))));
        }
    }
}
