//! The typesetter of the PDF report: the shipped fonts, measuring and
//! shaping text, breaking it into lines, and the drawing operations a page
//! is made of. It knows nothing of scans or findings; the report's content
//! is in the parent module.

use std::sync::LazyLock;

use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Rect};
use krilla::num::NormalizedF32;
use krilla::paint::Fill;
use krilla::surface::Surface;
use krilla::text::{Font, GlyphId, KrillaGlyph};
use ttf_parser::Face;

use crate::{inline, ReportError};

const REGULAR_TTF: &[u8] = include_bytes!("../../fonts/DejaVuSans.ttf");
const BOLD_TTF: &[u8] = include_bytes!("../../fonts/DejaVuSans-Bold.ttf");
const MONO_TTF: &[u8] = include_bytes!("../../fonts/DejaVuSansMono.ttf");

/// A colour as red, green, blue.
pub(super) type Colour = (u8, u8, u8);

/// One face: krilla's font for drawing, ttf-parser's view of the same bytes
/// for measuring (line breaking is ours to do) and rustybuzz's for shaping.
///
/// krilla's `draw_text` parses the face for every line it shapes, which is
/// most of the time of a long report (3.7 s for 10,000 findings); shaping
/// here with the face parsed once and handing krilla the glyphs
/// (`draw_glyphs`) does the same work without that.
pub(super) struct Typeface {
    font: Font,
    face: Face<'static>,
    shaper: rustybuzz::Face<'static>,
    units_per_em: f32,
    /// Glyph and advance of every character below [`SIMPLE_END`], looked
    /// up once: a cmap lookup per character was the next cost after
    /// shaping.
    simple: Vec<(u16, u16)>,
}

/// The end of the characters [`is_simple`] admits.
const SIMPLE_END: u32 = 0x530;

impl Typeface {
    pub(super) fn load(data: &'static [u8], name: &'static str) -> Result<Typeface, ReportError> {
        let face = Face::parse(data, 0).map_err(|_| ReportError::Font(name))?;
        let font = Font::new(data.into(), 0).ok_or(ReportError::Font(name))?;
        let shaper = rustybuzz::Face::from_slice(data, 0).ok_or(ReportError::Font(name))?;
        let simple = (0..SIMPLE_END)
            .map(|c| {
                let glyph = char::from_u32(c)
                    .and_then(|c| face.glyph_index(c))
                    .unwrap_or(ttf_parser::GlyphId(0));
                (glyph.0, face.glyph_hor_advance(glyph).unwrap_or(0))
            })
            .collect();
        Ok(Typeface {
            simple,
            units_per_em: f32::from(face.units_per_em()),
            font,
            face,
            shaper,
        })
    }

    /// Glyphs of one line of `text`, each with the byte range of the text
    /// it stands for (krilla writes those into the ToUnicode map, which is
    /// what makes the text searchable).
    pub(super) fn shape(&self, text: &str) -> Vec<KrillaGlyph> {
        if text.chars().all(is_simple) {
            return self.shape_simple(text);
        }
        let mut buffer = rustybuzz::UnicodeBuffer::new();
        buffer.push_str(text);
        buffer.guess_segment_properties();
        let rtl = buffer.direction() == rustybuzz::Direction::RightToLeft;
        let shaped = rustybuzz::shape(&self.shaper, &[], buffer);
        let infos = shaped.glyph_infos();
        let positions = shaped.glyph_positions();
        let upem = self.units_per_em;
        let mut glyphs = Vec::with_capacity(infos.len());
        for (i, (info, pos)) in infos.iter().zip(positions).enumerate() {
            let start = info.cluster as usize;
            // A cluster ends where the next cluster in text order starts:
            // after this glyph for left-to-right text, before it otherwise.
            let next = if rtl {
                infos[..i].iter().rev().find(|g| g.cluster != info.cluster)
            } else {
                infos[i + 1..].iter().find(|g| g.cluster != info.cluster)
            };
            let end = next.map_or(text.len(), |g| g.cluster as usize);
            glyphs.push(KrillaGlyph::new(
                GlyphId::new(info.glyph_id),
                pos.x_advance as f32 / upem,
                pos.x_offset as f32 / upem,
                pos.y_offset as f32 / upem,
                pos.y_advance as f32 / upem,
                start..end,
                None,
            ));
        }
        glyphs
    }

    /// Advance width of `text` at `size`; kerning is ignored, which only
    /// errs on the safe side for line breaking.
    pub(super) fn width(&self, text: &str, size: f32) -> f32 {
        let units: f32 = text
            .chars()
            .map(|c| match self.simple.get(c as usize) {
                Some((_, advance)) => f32::from(*advance),
                None => self
                    .face
                    .glyph_index(c)
                    .and_then(|g| self.face.glyph_hor_advance(g))
                    .map(f32::from)
                    .unwrap_or(self.units_per_em * 0.6),
            })
            .sum();
        units * size / self.units_per_em
    }
}

/// Characters (all below [`SIMPLE_END`]) of scripts that need no shaping: one glyph each, at its
/// advance (Latin, Greek and Cyrillic letters, digits, punctuation, but no
/// combining marks). Nearly all report text is made of these; shaping it
/// with rustybuzz was a third of the time of a long PDF, for kerning only.
fn is_simple(c: char) -> bool {
    matches!(c, ' '..='~' | '\u{a0}'..='\u{2ff}' | '\u{370}'..='\u{482}' | '\u{48a}'..='\u{52f}')
}

impl Typeface {
    pub(super) fn shape_simple(&self, text: &str) -> Vec<KrillaGlyph> {
        let upem = self.units_per_em;
        text.char_indices()
            .map(|(at, c)| {
                let (glyph, advance) = self.simple[c as usize];
                KrillaGlyph::new(
                    GlyphId::new(u32::from(glyph)),
                    f32::from(advance) / upem,
                    0.0,
                    0.0,
                    0.0,
                    at..at + c.len_utf8(),
                    None,
                )
            })
            .collect()
    }
}

pub(super) struct Fonts {
    pub(super) regular: Typeface,
    pub(super) bold: Typeface,
    pub(super) mono: Typeface,
}

/// The face a stretch of text is set in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    Regular,
    Bold,
    /// Inline code.
    Mono,
}

impl Fonts {
    pub(super) fn face(&self, style: Style) -> &Typeface {
        match style {
            Style::Regular => &self.regular,
            Style::Bold => &self.bold,
            Style::Mono => &self.mono,
        }
    }

    pub(super) fn width(&self, style: Style, text: &str, size: f32) -> f32 {
        self.face(style).width(text, size)
    }
}

static FONTS: LazyLock<Result<Fonts, ReportError>> = LazyLock::new(|| {
    Ok(Fonts {
        regular: Typeface::load(REGULAR_TTF, "DejaVuSans.ttf")?,
        bold: Typeface::load(BOLD_TTF, "DejaVuSans-Bold.ttf")?,
        mono: Typeface::load(MONO_TTF, "DejaVuSansMono.ttf")?,
    })
});

pub(super) fn fonts() -> Result<&'static Fonts, ReportError> {
    match &*FONTS {
        Ok(f) => Ok(f),
        Err(ReportError::Font(name)) => Err(ReportError::Font(name)),
        Err(_) => Err(ReportError::Font("DejaVu")),
    }
}

/// A line of text as runs of one style each.
pub(super) type Line = Vec<(Style, String)>;

/// Appends `text` in `style` to `line`, to its last run when that has the
/// same style.
pub(super) fn push_run(line: &mut Line, style: Style, text: &str) {
    if text.is_empty() {
        return;
    }
    match line.last_mut() {
        Some((last, run)) if *last == style => run.push_str(text),
        _ => line.push((style, text.to_string())),
    }
}

/// Template text in runs: its inline code in [`Style::Mono`], the rest in
/// `base`.
pub(super) fn runs(text: &str, base: Style) -> Vec<(Style, &str)> {
    inline::spans(text)
        .into_iter()
        .map(|s| (if s.code { Style::Mono } else { base }, s.text))
        .collect()
}

/// Breaks `text` into lines no wider than `width` (see [`wrap_runs`]).
pub(super) fn wrap(fonts: &Fonts, style: Style, text: &str, size: f32, width: f32) -> Vec<String> {
    wrap_runs(fonts, &[(style, text)], style, size, width)
        .into_iter()
        .map(|line| line.into_iter().map(|(_, run)| run).collect())
        .collect()
}

/// The paragraphs of `runs` (split at their line breaks), each a list of
/// words (split at spaces), each word a list of runs.
pub(super) fn words<'a>(runs: &[(Style, &'a str)]) -> Vec<Vec<Vec<(Style, &'a str)>>> {
    let mut paragraphs = vec![vec![Vec::new()]];
    for &(style, text) in runs {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                paragraphs.push(vec![Vec::new()]);
            }
            for (j, word) in line.split(' ').enumerate() {
                let paragraph = paragraphs.last_mut().expect("one paragraph at least");
                if j > 0 {
                    paragraph.push(Vec::new());
                }
                let current = paragraph.last_mut().expect("one word at least");
                if !word.is_empty() {
                    current.push((style, word));
                }
            }
        }
    }
    for paragraph in &mut paragraphs {
        if let Some((_, text)) = paragraph.last_mut().and_then(|w| w.last_mut()) {
            *text = text.trim_end_matches('\r');
        }
    }
    paragraphs
}

/// Breaks text in runs of styles into lines no wider than `width`: at
/// spaces when it can, inside a word when the word alone is too wide
/// (URLs), and at every line break of the text. A space between words
/// takes the style of the words around it when they share one, `base`
/// otherwise.
pub(super) fn wrap_runs(
    fonts: &Fonts,
    runs: &[(Style, &str)],
    base: Style,
    size: f32,
    width: f32,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for paragraph in words(runs) {
        let mut line: Line = Vec::new();
        let mut line_w = 0.0;
        for word in paragraph {
            let word_w: f32 = word.iter().map(|(s, t)| fonts.width(*s, t, size)).sum();
            let space_style = match (line.last(), word.first()) {
                (Some((a, _)), Some((b, _))) if a == b => *a,
                _ => base,
            };
            let space = fonts.width(space_style, " ", size);
            if !line.is_empty() && line_w + space + word_w <= width {
                push_run(&mut line, space_style, " ");
                word.iter().for_each(|(s, t)| push_run(&mut line, *s, t));
                line_w += space + word_w;
                continue;
            }
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            if word_w <= width {
                word.iter().for_each(|(s, t)| push_run(&mut line, *s, t));
                line_w = word_w;
                continue;
            }
            // A word wider than the line: break it where it fills the line.
            line_w = 0.0;
            for (style, text) in word {
                for c in text.chars() {
                    let c = c.encode_utf8(&mut [0; 4]).to_string();
                    let w = fonts.width(style, &c, size);
                    if line_w + w > width && !line.is_empty() {
                        lines.push(std::mem::take(&mut line));
                        line_w = 0.0;
                    }
                    push_run(&mut line, style, &c);
                    line_w += w;
                }
            }
        }
        lines.push(line);
    }
    lines
}

/// A drawing operation of the page being filled.
pub(super) enum Op {
    Text {
        x: f32,
        y: f32,
        size: f32,
        style: Style,
        colour: Colour,
        text: String,
    },
    Rect {
        x: f32,
        y: f32,
        w: f32,
        h: f32,
        colour: Colour,
    },
}

pub(super) fn fill(colour: Colour) -> Fill {
    Fill {
        paint: rgb::Color::new(colour.0, colour.1, colour.2).into(),
        opacity: NormalizedF32::ONE,
        rule: Default::default(),
    }
}

pub(super) fn draw(surface: &mut Surface<'_>, fonts: &Fonts, op: &Op) {
    match op {
        Op::Text {
            x,
            y,
            size,
            style,
            colour,
            text,
        } => {
            if text.is_empty() {
                return;
            }
            surface.set_fill(Some(fill(*colour)));
            let face = fonts.face(*style);
            let glyphs = face.shape(text);
            surface.draw_glyphs(
                Point::from_xy(*x, *y),
                &glyphs,
                face.font.clone(),
                text,
                *size,
                false,
            );
        }
        Op::Rect { x, y, w, h, colour } => {
            let Some(rect) = Rect::from_xywh(*x, *y, *w, *h) else {
                return;
            };
            let mut pb = PathBuilder::new();
            pb.push_rect(rect);
            if let Some(path) = pb.finish() {
                surface.set_fill(Some(fill(*colour)));
                surface.draw_path(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_wraps_within_the_width_and_long_words_break() {
        let fonts = fonts().unwrap();
        let text = format!("{} {}", "word ".repeat(60), "x".repeat(300));
        let lines = wrap(fonts, Style::Regular, &text, 9.0, 200.0);
        assert!(lines.len() > 5);
        for l in &lines {
            assert!(fonts.regular.width(l, 9.0) <= 200.0, "{l:?}");
        }
        assert_eq!(lines.concat().replace(' ', ""), text.replace(' ', ""));
    }

    #[test]
    fn inline_code_is_a_monospace_run_without_its_backticks() {
        let fonts = fonts().unwrap();
        let text = "Set `X-Frame-Options: DENY` on every response, a lone ` stays";
        let lines = wrap_runs(
            fonts,
            &runs(text, Style::Regular),
            Style::Regular,
            9.0,
            400.0,
        );
        let expected: Vec<Line> = vec![vec![
            (Style::Regular, "Set ".to_string()),
            (Style::Mono, "X-Frame-Options: DENY".to_string()),
            (
                Style::Regular,
                " on every response, a lone ` stays".to_string(),
            ),
        ]];
        assert_eq!(lines, expected);
        // Narrow: broken at spaces, code spaces included, each line within
        // the width, the text unchanged.
        let lines = wrap_runs(
            fonts,
            &runs(text, Style::Regular),
            Style::Regular,
            9.0,
            80.0,
        );
        assert!(lines.len() > 3);
        for line in &lines {
            let w: f32 = line.iter().map(|(s, t)| fonts.width(*s, t, 9.0)).sum();
            assert!(w <= 80.0, "{line:?}");
        }
        let back: String = lines
            .iter()
            .flatten()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join("");
        assert_eq!(
            back.replace(' ', ""),
            text.replacen('`', "", 2).replace(' ', "")
        );
    }

    #[test]
    fn line_breaks_in_the_text_start_new_lines() {
        let fonts = fonts().unwrap();
        assert_eq!(
            wrap(fonts, Style::Regular, "one\r\ntwo", 9.0, 400.0),
            ["one", "two"]
        );
    }
}
