fn main() {
    println!("loader {}", env!("CARGO_PKG_VERSION"));
}
