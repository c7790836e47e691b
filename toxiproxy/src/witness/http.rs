//! HTTP/1.x, read from a buffer that may hold part of a message: a request's method, path and the
//! lease's fields of its JSON body; a response's status. Bodies are framed by `Content-Length`
//! or chunked encoding; a response with neither runs to the connection's end, after which
//! nothing more on that connection can be paired (the caller is told).

use leasequake_reports::wire::{http_request, WireRequest};

use super::resp::Frame;

/// The longest header block read.
const HEADERS_MAX: usize = 64 * 1024;
/// The largest body whose fields are read (a larger one is framed, its fields left unread).
const BODY_READ_MAX: usize = 1 << 20;

/// A message's head: the first line's words, and how its body is framed.
struct Head<'a> {
    first: Vec<&'a str>,
    body: Body,
    len: usize,
}

enum Body {
    Length(usize),
    Chunked,
    /// Runs to the connection's end (a response with neither header).
    ToClose,
}

fn head(buf: &[u8], response: bool) -> Frame<Head<'_>> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > HEADERS_MAX { Frame::Bad("HTTP headers over 64 KiB".into()) } else { Frame::Partial };
    };
    let Ok(text) = std::str::from_utf8(&buf[..end]) else { return Frame::Bad("HTTP headers that are not text".into()) };
    let mut lines = text.split("\r\n");
    let first: Vec<&str> = lines.next().unwrap_or_default().splitn(3, ' ').collect();
    let mut body = if response { Body::ToClose } else { Body::Length(0) };
    for l in lines {
        let Some((name, value)) = l.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            match value.parse() {
                Ok(n) => body = Body::Length(n),
                Err(_) => return Frame::Bad(format!("a Content-Length of {value:?}")),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") && value.to_ascii_lowercase().contains("chunked") {
            body = Body::Chunked;
        }
    }
    if first.len() < 2 {
        return Frame::Bad("an HTTP first line of fewer than two words".into());
    }
    Frame::Done(Head { first, body, len: end + 4 }, end + 4)
}

/// The end of a chunked body starting at `buf[0]`, or more bytes needed.
fn chunked(buf: &[u8]) -> Frame<()> {
    let mut at = 0usize;
    loop {
        let Some(end) = buf[at..].windows(2).position(|w| w == b"\r\n") else { return Frame::Partial };
        let size_text = std::str::from_utf8(&buf[at..at + end]).unwrap_or("?");
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("?").trim(), 16) else {
            return Frame::Bad(format!("a chunk size of {size_text:?}"));
        };
        let Some(next) = (at + end + 2).checked_add(size).and_then(|n| n.checked_add(2)) else {
            return Frame::Bad("a chunk too long".into());
        };
        if size == 0 {
            // The last chunk; trailers end with an empty line.
            return match buf[at + end + 2..].windows(2).position(|w| w == b"\r\n") {
                Some(t) => Frame::Done((), at + end + 2 + t + 2),
                None => Frame::Partial,
            };
        }
        if buf.len() < next {
            return Frame::Partial;
        }
        at = next;
    }
}

/// The body's length after the head (chunked: including its framing), or more bytes needed.
fn body_len(buf: &[u8], h: &Head<'_>) -> Frame<usize> {
    let rest = &buf[h.len..];
    match h.body {
        Body::Length(n) if rest.len() >= n => Frame::Done(n, n),
        Body::Length(_) => Frame::Partial,
        Body::Chunked => chunked(rest).map(|(), n| n),
        Body::ToClose => Frame::Done(rest.len(), rest.len()),
    }
}

/// One request: what the witness records of it.
pub(crate) fn request(buf: &[u8]) -> Frame<WireRequest> {
    let h = match head(buf, false) {
        Frame::Done(h, _) => h,
        Frame::Partial => return Frame::Partial,
        Frame::Bad(w) => return Frame::Bad(w),
    };
    let len = match body_len(buf, &h) {
        Frame::Done(n, _) => n,
        Frame::Partial => return Frame::Partial,
        Frame::Bad(w) => return Frame::Bad(w),
    };
    let readable = matches!(h.body, Body::Length(_)) && len <= BODY_READ_MAX;
    let body = if readable { &buf[h.len..h.len + len] } else { &[][..] };
    Frame::Done(http_request(h.first[0], h.first[1], body), h.len + len)
}

/// One response: its status (`None` for an interim 1xx, which answers nothing yet), and whether
/// its body runs to the connection's end.
pub(crate) fn response(buf: &[u8]) -> Frame<(Option<u16>, bool)> {
    let h = match head(buf, true) {
        Frame::Done(h, _) => h,
        Frame::Partial => return Frame::Partial,
        Frame::Bad(w) => return Frame::Bad(w),
    };
    let Some(status) = h.first.get(1).and_then(|s| s.parse::<u16>().ok()) else {
        return Frame::Bad(format!("an HTTP status line {:?}", h.first.join(" ")));
    };
    if (100..200).contains(&status) {
        return Frame::Done((None, false), h.len);
    }
    let bodiless = status == 204 || status == 304;
    if bodiless || matches!(h.body, Body::ToClose) {
        return Frame::Done((Some(status), !bodiless), h.len);
    }
    match body_len(buf, &h) {
        Frame::Done(n, _) => Frame::Done((Some(status), false), h.len + n),
        Frame::Partial => Frame::Partial,
        Frame::Bad(w) => Frame::Bad(w),
    }
}

#[cfg(test)]
mod tests;
