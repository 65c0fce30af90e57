//! keel
fn main() {}
