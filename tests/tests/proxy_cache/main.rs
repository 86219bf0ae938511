//! The response cache end to end: hits and misses, the body file (memfd), revalidation,
//! `X-Cache`. One module per concern; `cache_proxy` holds their helpers.

mod age;
mod cache;
mod cache_proxy;
mod head_and_ranges;
mod head_miss;
mod joined;
mod memfd;
mod reload;
mod revalidate;
mod rfc9111;
mod rfc9111_scripted;
mod scripted;
mod xcache;
