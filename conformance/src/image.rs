//! Pictures of a workload's output as data (values, not pixels): the wave
//! keeps a few snapshots, and the HTML page draws them.

/// A small image of a field (row-major, `width x height`), e.g. a wavefield snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Caption, e.g. `step 300`.
    pub label: String,
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Values, row-major.
    pub values: Vec<f32>,
}

impl Image {
    /// `field` (`nx` by `ny`, row-major) sampled down to at most `side` pixels a side.
    pub fn downsample(label: String, field: &[f32], nx: usize, ny: usize, side: usize) -> Self {
        let (width, height) = (nx.min(side).max(1), ny.min(side).max(1));
        let values = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x * nx / width, y * ny / height)))
            .map(|(x, y)| field.get(y * nx + x).copied().unwrap_or(0.0))
            .collect();
        Self { label, width, height, values }
    }
}

#[cfg(test)]
mod tests {
    use super::Image;

    #[test]
    fn downsampling_keeps_corners_and_shape() {
        let field: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let image = Image::downsample("x".into(), &field, 10, 10, 5);
        assert_eq!((image.width, image.height, image.values.len()), (5, 5, 25));
        assert_eq!(image.values[0], 0.0);
        assert_eq!(image.values[24], 88.0);
        let small = Image::downsample("y".into(), &field, 10, 10, 64);
        assert_eq!(small.values, field);
    }
}
