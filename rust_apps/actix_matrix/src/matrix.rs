//! Square integer matrices and the naive triple-loop product the benchmark measures. Pure and
//! panic-free (the release-lto profiles abort on panic), so it is tested here on known cases.

use std::num::NonZeroUsize;

use serde::ser::{Serialize, Serializer};

/// An n×n matrix of `i64`, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    n: NonZeroUsize,
    cells: Vec<i64>,
}

/// Rows of unequal length, or not as many rows as columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a non-empty square matrix")]
pub struct NotSquare;

impl Matrix {
    /// A matrix from its rows.
    ///
    /// # Errors
    /// [`NotSquare`] unless there are n ≥ 1 rows of n cells each.
    pub fn from_rows(rows: &[Vec<i64>]) -> Result<Self, NotSquare> {
        let n = NonZeroUsize::new(rows.len()).ok_or(NotSquare)?;
        if rows.iter().any(|row| row.len() != n.get()) {
            return Err(NotSquare);
        }
        Ok(Self {
            n,
            cells: rows.concat(),
        })
    }

    /// An n×n matrix of uniform random values in `0..=9`.
    #[must_use]
    pub fn random(n: NonZeroUsize, rng: &mut fastrand::Rng) -> Self {
        let cells = (0..n.get() * n.get()).map(|_| rng.i64(0..=9)).collect();
        Self { n, cells }
    }

    /// The side length.
    #[must_use]
    pub fn n(&self) -> NonZeroUsize {
        self.n
    }

    fn rows(&self) -> std::slice::ChunksExact<'_, i64> {
        self.cells.chunks_exact(self.n.get())
    }

    fn column(&self, j: usize) -> impl Iterator<Item = &i64> {
        self.cells.iter().skip(j).step_by(self.n.get())
    }

    /// The rows as vectors, for tests and small answers.
    #[must_use]
    pub fn to_rows(&self) -> Vec<Vec<i64>> {
        self.rows().map(<[i64]>::to_vec).collect()
    }
}

/// `a × b` by the naive triple loop (row of `a` times column of `b` for every cell), the
/// algorithm every language in the suite implements alike.
///
/// Arithmetic wraps: the benchmark's values (0..=9, n ≤ 512) stay below 81·512, far from
/// overflow, and wrapping keeps arbitrary inputs from panicking in debug builds.
///
/// # Errors
/// [`NotSquare`] when the sides differ.
pub fn multiply(a: &Matrix, b: &Matrix) -> Result<Matrix, NotSquare> {
    if a.n != b.n {
        return Err(NotSquare);
    }
    let n = a.n.get();
    let mut cells = vec![0_i64; n * n];
    for (row_a, row_c) in a.rows().zip(cells.chunks_exact_mut(n)) {
        for (j, cell) in row_c.iter_mut().enumerate() {
            *cell = row_a
                .iter()
                .zip(b.column(j))
                .fold(0_i64, |sum, (x, y)| sum.wrapping_add(x.wrapping_mul(*y)));
        }
    }
    Ok(Matrix { n: a.n, cells })
}

impl Serialize for Matrix {
    /// As a JSON array of rows.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.rows())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rows: &[&[i64]]) -> Matrix {
        Matrix::from_rows(&rows.iter().map(|r| r.to_vec()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn multiplies_a_known_2x2() {
        let product = multiply(&m(&[&[1, 2], &[3, 4]]), &m(&[&[5, 6], &[7, 8]])).unwrap();
        assert_eq!(product.to_rows(), vec![vec![19, 22], vec![43, 50]]);
    }

    #[test]
    fn multiplies_a_known_3x3_and_is_not_commutative() {
        let a = m(&[&[1, 2, 3], &[4, 5, 6], &[7, 8, 9]]);
        let b = m(&[&[9, 8, 7], &[6, 5, 4], &[3, 2, 1]]);
        let ab = vec![vec![30, 24, 18], vec![84, 69, 54], vec![138, 114, 90]];
        assert_eq!(multiply(&a, &b).unwrap().to_rows(), ab);
        assert_ne!(multiply(&b, &a).unwrap().to_rows(), ab);
    }

    #[test]
    fn identity_leaves_a_matrix_alone() {
        let a = Matrix::random(
            NonZeroUsize::new(7).unwrap(),
            &mut fastrand::Rng::with_seed(1),
        );
        let mut id = vec![vec![0; 7]; 7];
        for (i, row) in id.iter_mut().enumerate() {
            row[i] = 1;
        }
        let id = Matrix::from_rows(&id).unwrap();
        assert_eq!(multiply(&a, &id).unwrap(), a);
        assert_eq!(multiply(&id, &a).unwrap(), a);
    }

    #[test]
    fn random_values_are_digits() {
        let a = Matrix::random(
            NonZeroUsize::new(32).unwrap(),
            &mut fastrand::Rng::with_seed(7),
        );
        assert!(a.cells.iter().all(|v| (0..=9).contains(v)));
        assert!(a.cells.iter().any(|&v| v != a.cells[0]), "not constant");
    }

    #[test]
    fn rejects_shapes_that_are_not_square() {
        assert_eq!(Matrix::from_rows(&[]), Err(NotSquare));
        assert_eq!(Matrix::from_rows(&[vec![1, 2]]), Err(NotSquare));
        assert_eq!(Matrix::from_rows(&[vec![1, 2], vec![3]]), Err(NotSquare));
        let one = m(&[&[1]]);
        assert_eq!(multiply(&one, &m(&[&[1, 0], &[0, 1]])), Err(NotSquare));
    }

    #[test]
    fn extreme_values_wrap_instead_of_panicking() {
        let big = m(&[&[i64::MAX, i64::MAX], &[i64::MAX, i64::MAX]]);
        assert!(multiply(&big, &big).is_ok());
    }

    #[test]
    fn serializes_as_rows() {
        let json = serde_json::to_string(&m(&[&[1, 2], &[3, 4]])).unwrap();
        assert_eq!(json, "[[1,2],[3,4]]");
    }
}
