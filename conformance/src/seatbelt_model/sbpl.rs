//! Reading SBPL text: the s-expressions a Seatbelt profile is written in (lists, symbols,
//! `"strings"` with escapes, `#"raw strings"` for regexes, integers, `;` comments).

use super::ModelError;

/// One s-expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sexp {
    /// `( ... )`.
    List(Vec<Sexp>),
    /// A bare word (`allow`, `file-write*`, `AF_UNIX`, `#t`).
    Sym(String),
    /// A string, `"..."` (escapes read) or `#"..."` (raw), as bytes.
    Str(Vec<u8>),
    /// An integer (`1`, `#o4000`).
    Int(i64),
}

/// Reads every top-level form of `text`.
pub fn read(text: &str) -> Result<Vec<Sexp>, ModelError> {
    let mut reader = Reader {
        bytes: text.as_bytes(),
        at: 0,
    };
    let mut forms = Vec::new();
    while reader.skip_blank() {
        forms.push(reader.form()?);
    }
    Ok(forms)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// Skips whitespace and comments; true when a form follows.
    fn skip_blank(&mut self) -> bool {
        while let Some(&b) = self.bytes.get(self.at) {
            if b == b';' {
                while self.bytes.get(self.at).is_some_and(|b| *b != b'\n') {
                    self.at += 1;
                }
            } else if b.is_ascii_whitespace() {
                self.at += 1;
            } else {
                return true;
            }
        }
        false
    }

    fn error(&self, what: &str) -> ModelError {
        ModelError::Syntax(format!("{what} at byte {}", self.at))
    }

    fn form(&mut self) -> Result<Sexp, ModelError> {
        match self.bytes.get(self.at) {
            Some(b'(') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    if !self.skip_blank() {
                        return Err(self.error("unclosed list"));
                    }
                    if self.bytes[self.at] == b')' {
                        self.at += 1;
                        return Ok(Sexp::List(items));
                    }
                    items.push(self.form()?);
                }
            }
            Some(b')') => Err(self.error("unexpected )")),
            Some(b'"') => {
                self.at += 1;
                self.string(true)
            }
            Some(b'#') if self.bytes.get(self.at + 1) == Some(&b'"') => {
                self.at += 2;
                self.string(false)
            }
            Some(_) => Ok(self.atom()),
            None => Err(self.error("unexpected end")),
        }
    }

    /// The rest of a string whose opening quote was read; `escapes` reads `\"`, `\\`, `\n`.
    fn string(&mut self, escapes: bool) -> Result<Sexp, ModelError> {
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err(self.error("unclosed string"));
            };
            self.at += 1;
            match b {
                b'"' => return Ok(Sexp::Str(out)),
                b'\\' if escapes => {
                    let Some(&next) = self.bytes.get(self.at) else {
                        return Err(self.error("unclosed string"));
                    };
                    self.at += 1;
                    out.push(match next {
                        b'n' => b'\n',
                        b't' => b'\t',
                        other => other,
                    });
                }
                other => out.push(other),
            }
        }
    }

    fn atom(&mut self) -> Sexp {
        let start = self.at;
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| !b.is_ascii_whitespace() && !b"()\";".contains(b))
        {
            self.at += 1;
        }
        let word = String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned();
        let number = match word.strip_prefix("#o") {
            Some(octal) => i64::from_str_radix(octal, 8).ok(),
            None => word.parse().ok(),
        };
        number.map_or(Sexp::Sym(word), Sexp::Int)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_strings_raw_strings_numbers_and_comments() {
        let forms =
            read("(version 1) ; why\n(allow x (regex #\"^a\\.b$\") (literal \"q\\\"r\") #o4000)")
                .expect("reads");
        assert_eq!(forms.len(), 2);
        assert_eq!(
            forms[1],
            Sexp::List(vec![
                Sexp::Sym("allow".into()),
                Sexp::Sym("x".into()),
                Sexp::List(vec![
                    Sexp::Sym("regex".into()),
                    Sexp::Str(b"^a\\.b$".to_vec())
                ]),
                Sexp::List(vec![
                    Sexp::Sym("literal".into()),
                    Sexp::Str(b"q\"r".to_vec())
                ]),
                Sexp::Int(0o4000),
            ])
        );
        assert!(read("(allow").is_err());
        assert!(read("\"open").is_err());
        assert!(read(")").is_err());
    }
}
