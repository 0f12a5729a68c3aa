import { colorsTuple, createTheme, Loader, type MantineThemeOverride, Table } from '@mantine/core';

/** The staff screens' theme. autoContrast picks black or white text for any brand colour. */
export const baseTheme: MantineThemeOverride = createTheme({
  // Mantine's own blue palette (shade 8 passes AA on white) keeps light variants legible.
  primaryColor: 'blue',
  primaryShade: 8,
  autoContrast: true,
  fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
  components: {
    // A spinner's aria-label is only allowed on an element with a role: a live status is what it is.
    Loader: Loader.extend({ defaultProps: { role: 'status' } }),
    // A table wider than a phone scrolls sideways; keyboard users must be able to focus and scroll it.
    TableScrollContainer: Table.ScrollContainer.extend({
      defaultProps: { scrollAreaProps: { viewportProps: { tabIndex: 0 } } },
    }),
  },
});

/** A tenant's brand as a theme: its primary colour on every button and link of the customer screens. */
export function brandTheme(primaryColor: string): MantineThemeOverride {
  return createTheme({
    ...baseTheme,
    primaryColor: 'brand',
    primaryShade: 6,
    colors: { brand: colorsTuple(primaryColor) },
  });
}

/**
 * Black or white, whichever reads better on `hex` (WCAG relative luminance), so any brand colour
 * keeps the header text legible (axe's contrast check runs on it).
 */
export function readableTextOn(hex: string): string {
  const channel = (offset: number) => {
    const value = Number.parseInt(hex.slice(offset, offset + 2), 16) / 255;
    return value <= 0.03928 ? value / 12.92 : ((value + 0.055) / 1.055) ** 2.4;
  };
  const luminance = 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
  // Contrast with white is 1.05/(L+0.05); with black (L+0.05)/0.05. Pick the larger.
  return 1.05 / (luminance + 0.05) >= (luminance + 0.05) / 0.05 ? '#ffffff' : '#000000';
}
