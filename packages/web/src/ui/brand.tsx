import { type CSSVariablesResolver, MantineProvider, type MantineThemeOverride } from '@mantine/core';
import { createContext, type ReactNode, useContext, useMemo, useState } from 'react';
import { baseTheme, brandTheme } from './theme.ts';

/**
 * Mantine's default dimmed grey and error red fall under WCAG AA contrast on white (axe flags them
 * as serious): darker shades for secondary text, descriptions and required marks.
 */
const contrastVariables: CSSVariablesResolver = () => ({
  variables: {},
  light: { '--mantine-color-dimmed': '#495057', '--mantine-color-error': '#c92a2a' },
  dark: {},
});

const SetBrandContext = createContext<(primaryColor: string | null) => void>(() => {});

/**
 * One MantineProvider whose theme follows the brand in force: the staff screens use the base theme,
 * the customer screens set their tenant's colour as soon as they learn it.
 */
export function BrandedProvider({ children }: { children: ReactNode }) {
  const [color, setColor] = useState<string | null>(null);
  const theme: MantineThemeOverride = useMemo(() => (color ? brandTheme(color) : baseTheme), [color]);
  return (
    <MantineProvider theme={theme} cssVariablesResolver={contrastVariables}>
      <SetBrandContext.Provider value={setColor}>{children}</SetBrandContext.Provider>
    </MantineProvider>
  );
}

export function useSetBrand(): (primaryColor: string | null) => void {
  return useContext(SetBrandContext);
}
