import { colorsTuple, createTheme, type MantineThemeOverride } from '@mantine/core';

/** The staff screens' theme. autoContrast picks black or white text for any brand colour. */
export const baseTheme: MantineThemeOverride = createTheme({
  primaryColor: 'brand',
  colors: { brand: colorsTuple('#1864ab') },
  autoContrast: true,
  fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
});

/** A tenant's brand as a theme: its primary colour on every button and link of the customer screens. */
export function brandTheme(primaryColor: string): MantineThemeOverride {
  return createTheme({ ...baseTheme, primaryColor: 'brand', colors: { brand: colorsTuple(primaryColor) } });
}
