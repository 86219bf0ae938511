fn main() {
    println!("proxy {}", env!("CARGO_PKG_VERSION"));
}
