//! The Redis image's clock shim (harness/clockshim), preloaded into a real `redis-server`: writing
//! an offset into its file moves Redis's wall clock at once (its `TIME`, and key expiry), forward
//! and back, and leaves it alone at 0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/clockshim.so"));

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cmd(port: u16, args: &[&str]) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    c.write_all(req.as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = c.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Redis's TIME minus the host's, ms.
fn skew(port: u16) -> i64 {
    let host = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let reply = cmd(port, &["TIME"]);
    let nums: Vec<i64> = reply.lines().filter_map(|l| l.parse().ok()).collect();
    nums[0] * 1000 + nums[1] / 1000 - host
}

fn set_offset(file: &std::path::Path, ms: i64) {
    // As the fault does: overwrite in place, space padded, never truncate.
    let mut f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.write_all(format!("{:<32}", format!("{ms:+}")).as_bytes()).unwrap();
}

#[test]
fn the_clock_shim_moves_redis_s_wall_clock_and_its_key_expiry_both_ways() {
    let dir = std::env::temp_dir().join(format!("lq-clockshim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = dir.join("clockshim.so");
    std::fs::write(&shim, SHIM).unwrap();
    let offset = dir.join("offset");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _server = Server(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .env("LD_PRELOAD", &shim)
            .env("LEASEQUAKE_CLOCK_FILE", &offset)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/deps installs it)"),
    );
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(skew(port).abs() < 1000, "no offset: no skew");
    cmd(port, &["SET", "k", "v", "PX", "5000"]);
    set_offset(&offset, 10_000);
    let s = skew(port);
    assert!((9_000..11_000).contains(&s), "forward 10 s, TIME is {s} ms off");
    assert_eq!(cmd(port, &["GET", "k"]), "$-1\r\n", "a 5 s key is gone after a 10 s jump");
    cmd(port, &["SET", "k2", "v", "PX", "5000"]);
    set_offset(&offset, -10_000);
    let s = skew(port);
    assert!((-11_000..-9_000).contains(&s), "back 10 s, TIME is {s} ms off");
    let pttl: i64 = cmd(port, &["PTTL", "k2"]).trim_start_matches(':').trim().parse().unwrap();
    assert!(pttl > 20_000, "a key set 10 s ahead lives 20 s longer after the jump back: PTTL {pttl}");
    set_offset(&offset, 0);
    assert!(skew(port).abs() < 1000, "offset 0: back to the host's clock");
    let _ = std::fs::remove_dir_all(&dir);
}
