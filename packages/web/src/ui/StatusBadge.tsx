import type { OperationState } from '@idem/contracts';
import { Badge } from '@mantine/core';
import { stateColor } from './format.ts';

/**
 * A state badge whose words wrap instead of being cut (I14-PHONE): Mantine's badge keeps one line
 * and ends in an ellipsis, which on a 390 px phone left "Re…" of a status. The full sentence is
 * the status, so it may take two lines but never loses a word.
 */
export function StatusBadge({ state, children }: { state: OperationState; children: string }) {
  return (
    <Badge
      color={stateColor(state)}
      variant="filled"
      tt="none"
      size="lg"
      radius="sm"
      data-testid="status"
      styles={{
        root: { height: 'auto', maxWidth: '100%', paddingBlock: 4 },
        label: { whiteSpace: 'normal', overflow: 'visible', textOverflow: 'clip', lineHeight: 1.3 },
      }}
    >
      {children}
    </Badge>
  );
}
