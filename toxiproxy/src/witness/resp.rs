//! RESP, read from a buffer that may hold part of a frame: a client's commands (arrays of bulk
//! strings, or inline lines) and the server's replies (RESP2 and RESP3). Each call parses one
//! whole frame from the start of the buffer or says it needs more bytes; nothing is kept between
//! calls, so a frame split across chunks is parsed again once complete (frames are small; the
//! caller bounds the buffer). Strings are kept as lossy UTF-8, cut at the vocabulary's limits.

use leasequake_reports::wire::{text, Resp, ARGS_MAX};

/// One frame parsed, or why not.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame<T> {
    /// A frame, and the bytes it took.
    Done(T, usize),
    /// More bytes are needed.
    Partial,
    /// Not RESP.
    Bad(String),
}

impl<T> Frame<T> {
    /// The frame's value through `f` (given the bytes it took).
    pub(crate) fn map<U>(self, f: impl FnOnce(T, usize) -> U) -> Frame<U> {
        match self {
            Frame::Done(v, n) => Frame::Done(f(v, n), n),
            Frame::Partial => Frame::Partial,
            Frame::Bad(w) => Frame::Bad(w),
        }
    }
}

/// Nesting deeper than this is refused (a lease's replies are flat).
const DEPTH_MAX: usize = 8;
/// Elements kept of an array (the rest are parsed and dropped).
const ELEMENTS_KEPT: usize = 16;
/// The most elements an aggregate may declare.
const ELEMENTS_MAX: i64 = 1 << 20;

/// One client command: its arguments as raw bytes.
pub(crate) fn command(buf: &[u8]) -> Frame<Vec<Vec<u8>>> {
    match buf.first() {
        None => Frame::Partial,
        Some(b'*') => {
            let Some((n, head)) = line_int(buf) else { return partial_or_bad(buf, "a command's length") };
            if !(0..=ELEMENTS_MAX).contains(&n) {
                return Frame::Bad(format!("a command of {n} arguments"));
            }
            let mut at = head;
            let mut args = Vec::new();
            for _ in 0..n {
                match bulk(&buf[at..]) {
                    Frame::Done(arg, used) => {
                        if args.len() < ARGS_MAX {
                            args.push(arg);
                        }
                        at += used;
                    }
                    Frame::Partial => return Frame::Partial,
                    Frame::Bad(why) => return Frame::Bad(why),
                }
            }
            Frame::Done(args, at)
        }
        Some(_) => match find_crlf(buf) {
            // An inline command (`PING\r\n`), as redis-cli's telnet users send.
            Some(end) => Frame::Done(
                buf[..end].split(u8::is_ascii_whitespace).filter(|a| !a.is_empty()).map(<[u8]>::to_vec).collect(),
                end + 2,
            ),
            None if buf.len() > 64 * 1024 => Frame::Bad("an inline command of over 64 KiB".into()),
            None => Frame::Partial,
        },
    }
}

fn bulk(buf: &[u8]) -> Frame<Vec<u8>> {
    match buf.first() {
        None => Frame::Partial,
        Some(b'$') => {
            let Some((len, head)) = line_int(buf) else { return partial_or_bad(buf, "a bulk string's length") };
            let Ok(len) = usize::try_from(len) else { return Frame::Bad(format!("a bulk string of length {len}")) };
            let Some(end) = head.checked_add(len).filter(|e| e.checked_add(2).is_some()) else {
                return Frame::Bad("a bulk string too long".into());
            };
            if buf.len() < end + 2 {
                return Frame::Partial;
            }
            Frame::Done(buf[head..end].to_vec(), end + 2)
        }
        Some(c) => Frame::Bad(format!("a command argument starting with byte {c}")),
    }
}

/// One server reply (RESP2 or RESP3). Pushes (`>`) and attributes (`|`) are parsed and returned
/// as `None`, for the caller to skip (they answer no command).
pub(crate) fn reply(buf: &[u8]) -> Frame<Option<Resp>> {
    value(buf, 0)
}

fn value(buf: &[u8], depth: usize) -> Frame<Option<Resp>> {
    let Some(&kind) = buf.first() else { return Frame::Partial };
    if depth > DEPTH_MAX {
        return Frame::Bad("a reply nested too deep".into());
    }
    let Some(end) = find_crlf(buf) else { return Frame::Partial };
    let text = || text(&buf[1..end]);
    let line = end + 2;
    match kind {
        b'+' => Frame::Done(Some(Resp::Simple(text())), line),
        b'-' => Frame::Done(Some(Resp::Error(text())), line),
        b':' => match parse_int(&buf[1..end]) {
            Some(n) => Frame::Done(Some(Resp::Int(n)), line),
            None => Frame::Bad("an integer reply that is no integer".into()),
        },
        b'_' => Frame::Done(Some(Resp::Bulk(None)), line),
        b'#' => Frame::Done(Some(Resp::Int(i64::from(buf.get(1) == Some(&b't')))), line),
        b',' | b'(' => Frame::Done(Some(Resp::Other(text())), line),
        b'$' | b'=' | b'!' => blob(buf, kind, line),
        b'*' | b'~' | b'%' | b'>' | b'|' => aggregate(buf, kind, line, depth),
        c => Frame::Bad(format!("a reply starting with byte {c}")),
    }
}

fn blob(buf: &[u8], kind: u8, head: usize) -> Frame<Option<Resp>> {
    let Some(len) = parse_int(&buf[1..head - 2]) else { return Frame::Bad("a blob length that is no integer".into()) };
    if len < 0 {
        return Frame::Done(Some(Resp::Bulk(None)), head);
    }
    let Some(end) = usize::try_from(len).ok().and_then(|l| head.checked_add(l)).filter(|e| e.checked_add(2).is_some())
    else {
        return Frame::Bad("a blob too long".into());
    };
    if buf.len() < end + 2 {
        return Frame::Partial;
    }
    let s = text(&buf[head..end]);
    let v = match kind {
        b'!' => Resp::Error(s),
        b'=' => Resp::Other(s),
        _ => Resp::Bulk(Some(s)),
    };
    Frame::Done(Some(v), end + 2)
}

fn aggregate(buf: &[u8], kind: u8, head: usize, depth: usize) -> Frame<Option<Resp>> {
    let Some(n) = parse_int(&buf[1..head - 2]) else {
        return Frame::Bad("an aggregate length that is no integer".into());
    };
    if n < 0 {
        return Frame::Done(Some(Resp::Array(None)), head);
    }
    if n > ELEMENTS_MAX {
        return Frame::Bad(format!("an aggregate of {n} elements"));
    }
    let count = if kind == b'%' || kind == b'|' { n * 2 } else { n };
    let mut at = head;
    let mut items = Vec::new();
    for _ in 0..count {
        match value(&buf[at..], depth + 1) {
            Frame::Done(item, used) => {
                if let Some(item) = item.filter(|_| items.len() < ELEMENTS_KEPT) {
                    items.push(item);
                }
                at += used;
            }
            Frame::Partial => return Frame::Partial,
            Frame::Bad(why) => return Frame::Bad(why),
        }
    }
    match kind {
        // An attribute precedes the reply it describes: that reply follows.
        b'|' => match value(&buf[at..], depth) {
            Frame::Done(v, used) => Frame::Done(v, at + used),
            other => other,
        },
        b'>' => Frame::Done(None, at),
        _ => Frame::Done(Some(Resp::Array(Some(items))), at),
    }
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

/// The integer on the first line after the type byte, and where the next line starts.
fn line_int(buf: &[u8]) -> Option<(i64, usize)> {
    let end = find_crlf(buf)?;
    Some((parse_int(&buf[1..end])?, end + 2))
}

fn partial_or_bad<T>(buf: &[u8], what: &str) -> Frame<T> {
    match find_crlf(buf) {
        None if buf.len() < 32 => Frame::Partial,
        _ => Frame::Bad(format!("{what} that is no integer")),
    }
}

fn parse_int(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

#[cfg(test)]
mod tests;
