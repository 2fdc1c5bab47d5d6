/** Whether dist/ under the tron checkout `root` was built after the last change to any source. */
export function distIsFresh(root: string): boolean;
