//! `calculator`: safe arithmetic on an expression string.
//!
//! A small recursive-descent parser (no `eval`, no code execution): numbers,
//! `+ - * / % ^`, parentheses, the constants `pi` and `e`, and the functions
//! sqrt, abs, round, floor, ceil, exp, ln, log10, log2, sin, cos, tan, min, max.
//! Bad input is an error that names the problem and its position.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Number;

use super::{ToolContext, ToolError, TypedTool};

const MAX_LEN: usize = 1000;
const MAX_DEPTH: usize = 64;

pub struct Calculator;

/// The calculator's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expression {
    /// The expression to evaluate
    #[schemars(length(min = 1, max = MAX_LEN))]
    pub expression: String,
}

/// An evaluated expression.
#[derive(Debug, Serialize)]
pub struct Evaluated {
    pub expression: String,
    pub value: Number,
}

#[async_trait]
impl TypedTool for Calculator {
    const NAME: &'static str = "calculator";
    type Args = Expression;
    type Output = Evaluated;

    fn description(&self) -> &str {
        "Evaluates an arithmetic expression, e.g. \"(12 + 30) * 2\" or \"sqrt(2) ^ 2\"."
    }
    async fn run(&self, args: Expression, _ctx: &ToolContext) -> Result<Evaluated, ToolError> {
        let value = number(evaluate(&args.expression)?)?;
        Ok(Evaluated { expression: args.expression, value })
    }
}

/// Integral results print as integers (84, not 84.0).
fn number(v: f64) -> Result<Number, ToolError> {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Ok(Number::from(v as i64))
    } else {
        Number::from_f64(v).ok_or_else(|| "the result is not a finite number".into())
    }
}

/// Evaluates `expr`, or says what is wrong with it.
pub fn evaluate(expr: &str) -> Result<f64, String> {
    if expr.len() > MAX_LEN {
        return Err(format!("expression is longer than {MAX_LEN} characters"));
    }
    let mut p = Parser { s: expr.as_bytes(), pos: 0, depth: 0 };
    let v = p.expr()?;
    p.skip_ws();
    if p.pos < p.s.len() {
        return Err(p.error("unexpected character"));
    }
    if !v.is_finite() {
        return Err("the result is not a finite number".into());
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        match self.s.get(self.pos) {
            Some(c) => format!("{what} `{}` at position {}", *c as char, self.pos + 1),
            None => format!("{what}: the expression ended too early"),
        }
    }
    fn skip_ws(&mut self) {
        while self.s.get(self.pos).is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.pos) == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expr(&mut self) -> Result<f64, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("expression is nested too deeply".into());
        }
        let mut v = self.term()?;
        loop {
            if self.eat(b'+') {
                v += self.term()?;
            } else if self.eat(b'-') {
                v -= self.term()?;
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(v)
    }
    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        loop {
            if self.eat(b'*') {
                v *= self.unary()?;
            } else if self.eat(b'/') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("division by zero".into());
                }
                v /= d;
            } else if self.eat(b'%') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("modulo by zero".into());
                }
                v %= d;
            } else {
                return Ok(v);
            }
        }
    }
    /// Unary minus binds looser than `^`: -2^2 is -4.
    fn unary(&mut self) -> Result<f64, String> {
        if self.eat(b'-') {
            return Ok(-self.unary()?);
        }
        if self.eat(b'+') {
            return self.unary();
        }
        let base = self.primary()?;
        if self.eat(b'^') {
            return Ok(base.powf(self.unary()?));
        }
        Ok(base)
    }
    fn primary(&mut self) -> Result<f64, String> {
        self.skip_ws();
        if self.eat(b'(') {
            let v = self.expr()?;
            if !self.eat(b')') {
                return Err(self.error("expected `)`"));
            }
            return Ok(v);
        }
        let start = self.pos;
        match self.s.get(self.pos) {
            Some(c) if c.is_ascii_digit() || *c == b'.' => {
                while self.s.get(self.pos).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                text.parse().map_err(|_| format!("`{text}` is not a number"))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                while self.s.get(self.pos).is_some_and(|c| c.is_ascii_alphanumeric()) {
                    self.pos += 1;
                }
                let name = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("").to_owned();
                self.name(&name)
            }
            _ => Err(self.error("expected a number")),
        }
    }
    fn name(&mut self, name: &str) -> Result<f64, String> {
        match name {
            "pi" => return Ok(std::f64::consts::PI),
            "e" => return Ok(std::f64::consts::E),
            _ => {}
        }
        if !self.eat(b'(') {
            return Err(format!("unknown name `{name}`"));
        }
        let mut args = vec![self.expr()?];
        while self.eat(b',') {
            args.push(self.expr()?);
        }
        if !self.eat(b')') {
            return Err(self.error("expected `)`"));
        }
        let one = |f: fn(f64) -> f64| match args.as_slice() {
            [x] => Ok(f(*x)),
            _ => Err(format!("`{name}` takes one argument")),
        };
        match name {
            "sqrt" if args[0] < 0.0 => Err("square root of a negative number".into()),
            "sqrt" => one(f64::sqrt),
            "abs" => one(f64::abs),
            "round" => one(f64::round),
            "floor" => one(f64::floor),
            "ceil" => one(f64::ceil),
            "exp" => one(f64::exp),
            "ln" => one(f64::ln),
            "log10" => one(f64::log10),
            "log2" => one(f64::log2),
            "sin" => one(f64::sin),
            "cos" => one(f64::cos),
            "tan" => one(f64::tan),
            "min" => Ok(args.iter().copied().fold(f64::INFINITY, f64::min)),
            "max" => Ok(args.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            _ => Err(format!("unknown function `{name}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;

    #[test]
    fn evaluates_with_precedence() {
        assert_eq!(evaluate("(12 + 30) * 2"), Ok(84.0));
        assert_eq!(evaluate("2 + 3 * 4"), Ok(14.0));
        assert_eq!(evaluate("-2^2"), Ok(-4.0));
        assert_eq!(evaluate("2^3^2"), Ok(512.0));
        assert_eq!(evaluate("10 % 4 + max(1, 7, 3)"), Ok(9.0));
        assert_eq!(evaluate("sqrt(16) / 2"), Ok(2.0));
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        assert_eq!(evaluate("1 / 0").unwrap_err(), "division by zero");
        assert!(evaluate("2 +").unwrap_err().contains("ended too early"));
        assert!(evaluate("2 $ 3").unwrap_err().contains("position 3"));
        assert!(evaluate("foo(1)").unwrap_err().contains("unknown function"));
        assert!(evaluate(&"(".repeat(100)).unwrap_err().contains("nested"));
        assert!(evaluate("").is_err());
    }
}
