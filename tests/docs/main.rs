//! The README and the guide checked against the code: the README's layout
//! section against the tree, its tour compiled and run.

mod readme_layout;
mod readme_tour;
