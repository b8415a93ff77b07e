package botcheck

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"testing"
	_ "unsafe" // go:linkname: the attacker reads the library's own font

	"golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// The attacker of the picture knows what the library's source says: its
// digits are its font's glyphs drawn in dots of the palette's first
// colour, each skewed by up to 0.7 of a pixel a row, six side by side at a
// fixed stride, under a line of the same colour, waved, and sprinkled
// with circles of other colours. It keeps the first colour's pixels, finds
// the row of six, and matches each glyph, at every skew, around each
// place.

//go:linkname captchaFont github.com/dchest/captcha.font
var captchaFont [][]byte

const (
	glyphW, glyphH = 11, 18
	dot            = 2  // the dot size at 240×80 and six digits
	stride         = 26 // a digit's width and a dot between
)

type glyph struct {
	digit byte
	on    [][2]int // pixels, relative to the glyph's origin
	w, h  int
}

type pictureSolver struct{ glyphs []glyph }

func newPictureSolver() *pictureSolver {
	s := &pictureSolver{}
	for d, font := range captchaFont {
		for k := -5; k <= 5; k++ {
			skew := 0.7 * float64(k) / 5
			set := map[[2]int]bool{}
			xs := 8.0 // room for a negative skew
			x := int(xs)
			for yo := 0; yo < glyphH; yo++ {
				for xo := 0; xo < glyphW; xo++ {
					if font[yo*glyphW+xo] != 1 {
						continue
					}
					cx, cy := x+xo*dot, yo*dot
					// The library's circle of radius dot/2.
					for dy := -1; dy <= 1; dy++ {
						for dx := -1; dx <= 1; dx++ {
							if dx*dx+dy*dy <= 1 {
								set[[2]int{cx + dx, cy + dy}] = true
							}
						}
					}
				}
				xs += skew
				x = int(xs)
			}
			g := glyph{digit: byte(d)}
			for p := range set {
				g.on = append(g.on, p)
				g.w, g.h = max(g.w, p[0]+1), max(g.h, p[1]+1)
			}
			s.glyphs = append(s.glyphs, g)
		}
	}
	return s
}

// solve reads a PNG's digits, n of them.
func (s *pictureSolver) solve(pngBytes []byte, n int) []byte {
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		return nil
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	ink := make([][]int8, h) // 1 the digits' colour, 0 background, -1 a circle over it
	for y := range ink {
		ink[y] = make([]int8, w)
	}
	if p, ok := img.(*image.Paletted); ok {
		// The library's: the digits are the palette's first colour.
		for y := range ink {
			for x := range ink[y] {
				switch p.ColorIndexAt(x, y) {
				case 1:
					ink[y][x] = 1
				case 0:
				default:
					ink[y][x] = -1
				}
			}
		}
	} else {
		darkInk(img, func(x, y int) { ink[y][x] = 1 })
	}
	// The row of n digits: the window of their width with the most ink.
	cols := make([]int, w)
	for x := 0; x < w; x++ {
		for y := 0; y < h; y++ {
			if ink[y][x] == 1 {
				cols[x]++
			}
		}
	}
	span := n * stride
	x0, most := 0, -1
	for x := 0; x+span <= w; x++ {
		sum := 0
		for i := x; i < x+span; i++ {
			sum += cols[i]
		}
		if sum > most {
			x0, most = x, sum
		}
	}
	// Its height: the band of a glyph's height with the most ink.
	y0, most := 0, -1
	for y := 0; y+glyphH*dot <= h; y++ {
		sum := 0
		for yy := y; yy < y+glyphH*dot; yy++ {
			for x := x0; x < x0+span; x++ {
				if ink[yy][x] == 1 {
					sum++
				}
			}
		}
		if sum > most {
			y0, most = y, sum
		}
	}
	// Matching on a padded copy: a glyph placed past the edge meets
	// background.
	const pad = 24
	pw := w + 2*pad
	flat := make([]int8, pw*(h+2*pad))
	for y := range ink {
		copy(flat[(y+pad)*pw+pad:], ink[y])
	}
	digits := make([]byte, n)
	for i := range digits {
		cx := x0 + i*stride - 8
		best := -1 << 30
		for _, g := range s.glyphs {
			offsets := make([]int, len(g.on))
			for k, q := range g.on {
				offsets[k] = q[1]*pw + q[0]
			}
			for oy := max(y0-10, -pad); oy <= min(y0+10, h+pad-g.h); oy++ {
				for ox := max(cx-8, -pad); ox <= min(cx+8, w+pad-g.w); ox++ {
					base := (oy+pad)*pw + ox + pad
					score := 0
					for _, o := range offsets {
						score += inkWeight[flat[base+o]+1]
					}
					if score > best {
						best, digits[i] = score, g.digit
					}
				}
			}
		}
	}
	return digits
}

// inkWeight scores a glyph's pixel by what the picture has there: a circle
// over it (-1) says nothing, background (0) counts against, the digits'
// colour (1) for.
var inkWeight = [3]int{0, -1, 1}

// stamp draws glyph's coverage in ink as the picture does, unbent.
func stamp(dst *image.RGBA, glyph *image.Alpha, x, y, angle, shear float64, ink color.RGBA) {
	stampWarped(dst, glyph, x, y, angle, shear, 1, nil, ink)
}

// fontSolver is the attacker who has read this package's drawing code
// too: it matches the very typefaces the picture uses, rendered as it
// renders them, at three turns, digit by digit where the layout puts
// them.
type fontSolver struct{ glyphs []glyph }

func newFontSolver(t testing.TB) *fontSolver {
	fonts, err := pictureFonts()
	if err != nil {
		t.Fatal(err)
	}
	s := &fontSolver{}
	for _, f := range fonts {
		face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: 44, DPI: 72, Hinting: font.HintingNone})
		if err != nil {
			t.Fatal(err)
		}
		for d := range 10 {
			alpha := image.NewAlpha(image.Rect(0, 0, 64, 64))
			dr := font.Drawer{Dst: alpha, Src: image.Opaque, Face: face, Dot: fixed.P(14, 50)}
			dr.DrawString(string('0' + rune(d)))
			for _, angle := range []float64{-0.2, 0, 0.2} {
				canvas := image.NewRGBA(image.Rect(0, 0, 64, 64))
				stamp(canvas, alpha, 0, 0, angle, 0, color.RGBA{255, 255, 255, 255})
				g := glyph{digit: byte(d)}
				for y := range 64 {
					for x := range 64 {
						if canvas.RGBAAt(x, y).R > 128 {
							g.on = append(g.on, [2]int{x, y})
							g.w, g.h = max(g.w, x+1), max(g.h, y+1)
						}
					}
				}
				s.glyphs = append(s.glyphs, g)
			}
		}
		face.Close()
	}
	return s
}

func (s *fontSolver) solve(pngBytes []byte, n int) []byte {
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		return nil
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	const pad = 64
	pw := w + 2*pad
	flat := make([]int8, pw*(h+2*pad))
	for i := range flat {
		flat[i] = -1 // off the picture: background
	}
	darkInk(img, func(x, y int) { flat[(y+pad)*pw+x+pad] = 1 })
	digits := make([]byte, n)
	lo, hi := 2, 14 // where the layout may put the first digit
	for i := range digits {
		best, bestX := math.Inf(-1), lo
		for _, g := range s.glyphs {
			for oy := -10; oy <= 10; oy++ {
				for ox := lo; ox <= hi; ox++ {
					base := (oy+pad)*pw + ox + pad
					score := 0
					for _, q := range g.on {
						score += int(flat[base+q[1]*pw+q[0]])
					}
					if v := float64(score) / float64(len(g.on)); v > best {
						best, bestX, digits[i] = v, ox, g.digit
					}
				}
			}
		}
		lo, hi = bestX+32, bestX+39
	}
	return digits
}

// darkInk marks each pixel of img much darker than the paper (its
// commonest shade): the digits, on a picture with no palette to tell them
// by.
func darkInk(img image.Image, mark func(x, y int)) {
	b := img.Bounds()
	lum := func(x, y int) int { return int(color.GrayModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.Gray).Y) }
	var hist [256]int
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			hist[lum(x, y)]++
		}
	}
	paper := 0
	for v := range hist {
		if hist[v] > hist[paper] {
			paper = v
		}
	}
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			if lum(x, y) < paper-60 {
				mark(x, y)
			}
		}
	}
}
